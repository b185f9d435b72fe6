"""The user's profile with a real model: facts carried, invented, superseded kept.

Each user of ``data/profile_users.jsonl`` (12 users, English and Chinese;
odd lines ``dev``, even lines ``held-out``) has memories stored verbatim in a
fresh embedded store (mem0, Qdrant Edge, the hash embedder: embeddings play
no part), the superseded ones marked as the time judgement marks them. Then
one refresh of the package's :class:`ProfileRefresher` runs with an
OpenAI-compatible chat model (``--base-url``; by default the local
Qwen2.5-Coder-1.5B-Instruct of ``/work/shared/llm/local-llm``), temperature 0.

Per user, before the check (the model's lines) and after it (what is stored):

* **carried**: share of the user's current facts the profile holds (a fact is
  carried when one of its keywords is in the profile);
* **invented**: profile lines that name a capitalised word or a number no
  current memory holds, or whose words are mostly in no current memory (a
  tokenizer of this script's own, not the package's check);
* **superseded kept**: superseded values the profile still states;
* tokens in and out, and seconds per refresh.

The prompt wording was tuned on ``--split dev``; report ``--split held-out``.

    python benchmarks/user_profile.py --split held-out --out docs/benchmarks/profile.json

``--scripted`` answers with the package's ``ScriptedChatModel`` (a smoke run:
its figures measure no model).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import re
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "profile_users.jsonl"
DEFAULT_URL = "http://127.0.0.1:8765/v1"

_ENTITY = re.compile(r"(?<![\w'])(?:[A-Z][a-zA-Z'’é-]+|\d[\d.,]*)")
_WORD = re.compile(r"[a-zA-Z]{3,}|[\u3400-\u9fff]")
_STOP = frozenset(
    [
        *("the", "and", "has", "have", "had", "with", "for", "who", "are", "was", "were"),
        *("his", "her", "their", "user", "users", "is", "in", "at", "on", "of", "to"),
        *("a", "an", "as", "by", "from", "now", "every", "each", "likes", "like"),
    ]
)
_CALENDAR = {
    *(datetime(2024, m, 1).strftime("%B").lower() for m in range(1, 13)),
    *(datetime(2024, 1, d).strftime("%A").lower() for d in range(1, 8)),
}


def load(split: str, data: Path = DATA) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in data.read_text(encoding="utf-8").splitlines() if line]
    return [row for row in rows if split == "all" or row["split"] == split]


def _words(text: str) -> set[str]:
    return {w.lower()[:5] for w in _WORD.findall(text) if w.lower() not in _STOP}


def invented(line: str, current: str) -> bool:
    """Whether ``line`` says what no current memory says (this script's reading)."""
    low = current.lower()
    # The first word of a line opens a sentence ("Lives in ..."), not a name.
    for match in _ENTITY.finditer(line):
        name = match.group(0).rstrip(".,")
        if match.start() == 0 or name.lower() in _CALENDAR or re.fullmatch(r"(19|20)\d\d", name):
            continue
        if name.lower() not in low:
            return True
    words = _words(line)
    return bool(words) and len(words & _words(current)) / len(words) < 0.5


def score(lines: list[str], user: dict[str, Any]) -> dict[str, Any]:
    """What ``lines`` carry, invent and keep of ``user``'s facts."""
    text = "\n".join(lines).lower()
    current = "\n".join(m["text"] for m in user["memories"] if m["current"])
    carried = [any(k.lower() in text for k in fact) for fact in user["carry"]]
    kept = [value for value in user["superseded"] if value.lower() in text]
    return {
        "lines": len(lines),
        "carried": sum(carried),
        "facts": len(carried),
        "invented": [line for line in lines if invented(line, current)],
        "superseded_kept": kept,
    }


def model_for(args: argparse.Namespace) -> Any:
    if args.scripted:
        from agentscope_mem0.testing import ScriptedChatModel

        def answer(messages: list[Any], tools: Any) -> str:
            # Echo the facts given, as a model that follows the prompt would.
            prompt = messages[-1].get_text_content() or ""
            return "\n".join(re.findall(r"^- .+$", prompt, re.M)) + "\n- Owns a yacht"

        return ScriptedChatModel(answer)
    from real_model import chat_model

    return chat_model(args.base_url, args.model, "none")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from agentscope_mem0 import SqliteWorkingStore, build_local_memory
    from agentscope_mem0._mem0.backend import Mem0Backend
    from agentscope_mem0._memories.lifecycle import SUPERSEDED_BY
    from agentscope_mem0._profile.refresher import ProfileRefresher
    from agentscope_mem0._scope import Scope
    from agentscope_mem0.testing import HashEmbedding

    users = load(args.split, args.data)[: args.limit or None]
    model = model_for(args)
    folder = Path(tempfile.mkdtemp(prefix="profile-bench-"))
    memory = build_local_memory(model, embedding_model=HashEmbedding(), folder=folder / "data")
    backend = Mem0Backend(memory)
    store = SqliteWorkingStore(folder / "working")
    refresher = ProfileRefresher(backend, model, store, timeout=args.timeout)
    rows = []
    for user in users:
        scope = Scope(user["id"])
        ids = []
        for item in user["memories"]:
            said = datetime.fromisoformat(item["said_at"]).replace(tzinfo=UTC)
            results = await backend.add(
                [{"role": "user", "content": item["text"]}], scope, infer=False, said_at=said
            )
            ids.append(str(results[0]["id"]))
        for item, memory_id in zip(user["memories"], ids, strict=True):
            if not item["current"]:
                newest = ids[max(i for i, m in enumerate(user["memories"]) if m["current"])]
                await backend.update_metadata(memory_id, {SUPERSEDED_BY: newest})
        done = await refresher.refresh(user["id"])
        raw = [*done.distilled.lines, *done.distilled.dropped]
        row = {
            "user": user["id"],
            "lang": user["lang"],
            "memories_given": done.memories,
            "profile": done.distilled.lines,
            "dropped": done.distilled.dropped,
            "before_check": score(raw, user),
            "after_check": score(done.distilled.lines, user),
            "tokens_in": done.tokens_in,
            "tokens_out": done.tokens_out,
            "seconds": round(done.seconds, 2),
        }
        rows.append(row)
        after = row["after_check"]
        print(
            f"{user['id']}: carried {after['carried']}/{after['facts']}, invented "
            f"{len(after['invented'])}, superseded kept {len(after['superseded_kept'])}, "
            f"{row['tokens_in']}+{row['tokens_out']} tokens, {row['seconds']} s",
            file=sys.stderr,
        )
    store.close()
    return {"rows": rows, "summary": summary(rows)}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"users": len(rows)}
    for side in ("before_check", "after_check"):
        facts = sum(r[side]["facts"] for r in rows)
        out[side] = {
            "carried_share": round(sum(r[side]["carried"] for r in rows) / facts, 3)
            if facts
            else None,
            "invented_lines": sum(len(r[side]["invented"]) for r in rows),
            "superseded_kept": sum(len(r[side]["superseded_kept"]) for r in rows),
            "lines": sum(r[side]["lines"] for r in rows),
        }
    n = len(rows) or 1
    out["tokens_in_per_refresh"] = round(sum(r["tokens_in"] for r in rows) / n, 1)
    out["tokens_out_per_refresh"] = round(sum(r["tokens_out"] for r in rows) / n, 1)
    out["seconds_per_refresh"] = round(sum(r["seconds"] for r in rows) / n, 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="held-out", choices=["dev", "held-out", "all"])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--limit", type=int, default=0, help="First N users only (0: all).")
    parser.add_argument("--base-url", default=DEFAULT_URL)
    parser.add_argument("--model", default="qwen")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--scripted", action="store_true", help="The package's scripted model.")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    result = asyncio.run(run(args))
    result["command"] = "python benchmarks/user_profile.py " + " ".join(sys.argv[1:])
    result["model"] = "scripted" if args.scripted else f"{args.model} at {args.base_url}"
    result["split"] = args.split
    result["machine"] = f"{platform.machine()}, {platform.python_version()}"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(json.dumps(result["summary"], indent=1))


if __name__ == "__main__":
    main()
