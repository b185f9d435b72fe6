"""The stores the LoCoMo recall benchmark fills side by side, and asking them.

Four mem0 clients on one folder each: the embedded default, the same with
release 0.2's keyword encoder, the package's Qdrant server provider (on
qdrant-client's local mode) and mem0's own Qdrant provider. Every turn is
stored through the middleware's backend and every question asked through it.
"""

from __future__ import annotations

import subprocess
import time
import types
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from _recall_score import TOP_K

from agentscope_mem0 import build_local_memory, build_mem0_config
from agentscope_mem0._mem0.backend import Mem0Backend
from agentscope_mem0._scope import Scope
from agentscope_mem0.local import install_keyword_encoder
from agentscope_mem0.testing import ScriptedChatModel

ROOT = Path(__file__).resolve().parents[1]
RELEASE_02 = "30d9697"  # the commit of release 0.2


def release_02_encoder() -> Any:
    """Release 0.2's keyword encoder, loaded from this repository's history."""
    source = subprocess.run(
        ["git", "-C", str(ROOT), "show", f"{RELEASE_02}:src/agentscope_mem0/local/_keyword.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    module = types.ModuleType("release_02_keyword")
    exec(compile(source, "release_02_keyword.py", "exec"), module.__dict__)
    return module.KeywordEncoder()


def said_at(date: str, position: int) -> str:
    """A turn's time: its session's date (LoCoMo's "1:56 pm on 8 May, 2023") plus its place."""
    try:
        start = datetime.strptime(date.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        start = datetime(2023, 1, 1, tzinfo=UTC)
    return (start + timedelta(seconds=position)).isoformat()


def build_stores(folder: Path, model: Any) -> dict[str, Any]:
    """The four mem0 clients, empty."""
    chat = ScriptedChatModel()
    edge = build_local_memory(chat, embedding_model=model, folder=folder / "edge")
    old_edge = build_local_memory(chat, embedding_model=model, folder=folder / "edge-0.2")
    old_edge.vector_store._bm25_encoder = release_02_encoder()

    def server(provider: str, name: str) -> Any:
        from mem0 import AsyncMemory

        fields = {
            "vector_store": {
                "provider": provider,
                "config": {
                    "collection_name": "locomo",
                    "embedding_model_dims": model.dimensions,
                    "path": str(folder / name),
                },
            },
            "history_db_path": str(folder / f"{name}-history.db"),
        }
        config = build_mem0_config(chat_model=chat, embedding_model=model, mem0_config=fields)
        return AsyncMemory(config=config)

    new_server = server("agentscope_qdrant", "server")
    old_server = server("qdrant", "server-0.2")
    install_keyword_encoder(old_server, release_02_encoder())
    return {"edge": edge, "edge-0.2": old_edge, "server": new_server, "server-0.2": old_server}


async def store_turns(
    memory: Any, conversations: list[dict[str, Any]]
) -> tuple[dict[str, str], float]:
    """Every turn, one ``add`` each; returns memory id -> turn id, and the seconds taken."""
    backend = Mem0Backend(memory)
    to_turn: dict[str, str] = {}
    started = time.perf_counter()
    for conv in conversations:
        scope = Scope(user_id=conv["id"])
        for turn in conv["turns"]:
            message = {"role": "user", "content": turn["text"], "said_at": turn["said_at"]}
            results = await backend.add(
                [message], scope, infer=False, metadata={"dia_id": turn["dia_id"]}
            )
            for result in results:
                to_turn[str(result["id"])] = turn["dia_id"]
    return to_turn, time.perf_counter() - started


async def rank_all(
    memory: Any, to_turn: dict[str, str], conversations: list[dict[str, Any]]
) -> tuple[dict[str, list[list[str]]], float]:
    """Conversation -> the turn ids found for each of its questions; and seconds per search."""
    backend = Mem0Backend(memory)
    out: dict[str, list[list[str]]] = {}
    started = time.perf_counter()
    count = 0
    for conv in conversations:
        scope = Scope(user_id=conv["id"])
        rows = []
        for q in conv["questions"]:
            hits = await backend.search(q["question"], scope, top_k=TOP_K)
            rows.append([to_turn.get(str(h.id), "?") for h in hits])
            count += 1
        out[conv["id"]] = rows
    return out, (time.perf_counter() - started) / max(count, 1)


def keyword_only(memory: Any, to_turn: dict[str, str], conversations: list[dict[str, Any]]) -> Any:
    """The engine's BM25 alone (the store's keyword ranking, not a mem0 path)."""
    out = {}
    for conv in conversations:
        rows = []
        for q in conv["questions"]:
            hits = memory.vector_store.keyword_hits(
                q["question"], top_k=TOP_K, filters={"user_id": conv["id"]}
            )
            rows.append([to_turn.get(str(h.id), "?") for h in hits])
        out[conv["id"]] = rows
    return out
