"""Questions that name a time: answered from the right period, before and after #39.

The set (``benchmarks/data/temporal_questions.jsonl``, written before the
code it measures) holds small histories of one user each: memories with the
time they were said, an event date where the text gives one, and which newer
memory superseded which; then a question asked at a time of its own ("What
did I book last week?", "我2023年5月在读什么书？") and the memories of the
right period. Halves alternate by line: odd lines are dev (what the period
rules were written against), even lines held-out (reported, never tuned on).

Every history is stored in one embedded store (Qdrant Edge, the offline e5
model of ``agentscope-mem0[local]``), a user per item, with
``Mem0Backend.add(..., infer=False)`` said at its time; the timeline
(``event_date``, ``superseded_by``, ``valid_until``) is written into the
metadata as the time judgement writes it. Each question is then asked the
way a reply asks it (``retrieve``, top 5, recall mode ``query``):

* **before**: without a period, today's read (superseded memories hidden);
* **after**: with the time the question names (``time_in``): a calendar
  period read against the item's own time, or one told by an event of the
  user's ("before I moved"), placed by the memory that tells of the event.

Answered from the right period: the first memory recalled is one of the
item's answers. Shown: an answer is among the memories recalled at all.
Questions whose time is an event ("before I moved") are reported apart.

Run from the repository root::

    python benchmarks/temporal.py
    python benchmarks/temporal.py --embedder hash --limit 6 --out /tmp/t.json

Results go to ``docs/benchmarks/temporal.json`` (figures in ``docs/benchmarks/temporal.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

from agentscope_mem0 import build_local_memory
from agentscope_mem0._mem0.backend import Mem0Backend
from agentscope_mem0._memories.lifecycle import iso
from agentscope_mem0._recall.recall import retrieve
from agentscope_mem0._scope import Scope
from agentscope_mem0._text.dates import parse_time
from agentscope_mem0._text.periods import EventPeriod, time_in
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data" / "temporal_questions.jsonl"
OUT = ROOT / "docs" / "benchmarks" / "temporal.json"
TOP_K = 5
EVENT_KINDS = ("before-event", "after-event", "at-event")


def load(path: Path, limit: int | None) -> list[dict[str, Any]]:
    """The items, each with its split as the file gives it (alternating lines)."""
    items = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    for number, item in enumerate(items):
        rule = "dev" if number % 2 == 0 else "held-out"
        assert item["split"] == rule, f"{item['id']}: the halves alternate by line"
    return items[:limit] if limit else items


def embedder(name: str) -> Any:
    if name == "hash":
        return HashEmbedding()
    from agentscope_mem0.local import OfflineE5Embedding

    return OfflineE5Embedding()


async def store_history(backend: Mem0Backend, item: dict[str, Any]) -> dict[str, str]:
    """The item's memories in its own scope, timeline included; memory id -> item id."""
    scope = Scope(user_id=item["id"])
    stored: dict[str, str] = {}
    said: dict[str, str] = {}
    for memory in item["memories"]:
        when = parse_time(memory["said"])
        assert when is not None, f"{item['id']}: said {memory['said']!r} is not a time"
        message = {"role": "user", "content": memory["text"]}
        results = await backend.add([message], scope, infer=False, said_at=when)
        stored[memory["id"]] = str(results[0]["id"])
        said[memory["id"]] = iso(when)
    by_id = {memory["id"]: memory for memory in item["memories"]}
    for memory in item["memories"]:
        changes: dict[str, Any] = {}
        if memory.get("event"):
            changes["event_date"] = memory["event"]
        newer = memory.get("superseded_by")
        if newer:
            # As the judgement writes it: the newer fact's event date, else its said time.
            changes["superseded_by"] = stored[newer]
            changes["valid_until"] = by_id[newer].get("event") or said[newer]
        if changes:
            await backend.update_metadata(stored[memory["id"]], changes)
    return {mem0_id: local for local, mem0_id in stored.items()}


async def ask(backend: Mem0Backend, item: dict[str, Any], *, with_period: bool) -> list[str]:
    """The ids (the item's own) of what a reply recalls for the question."""
    now = parse_time(item["now"])
    period = time_in(item["question"], now) if with_period and now else None
    hits = await retrieve(
        backend, Scope(user_id=item["id"]), item["question"], top_k=TOP_K, period=period
    )
    return [str(hit.id) for hit in hits]


def share(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    right = sum(1 for row in rows if row[key])
    return {"right": right, "of": len(rows), "share": round(right / len(rows), 3) if rows else None}


async def run(args: argparse.Namespace) -> dict[str, Any]:
    items = load(args.data, args.limit)
    folder = Path(tempfile.mkdtemp(prefix="temporal-"))
    memory = build_local_memory(
        ScriptedChatModel(), embedding_model=embedder(args.embedder), folder=folder
    )
    backend = Mem0Backend(memory)
    rows = []
    started = time.perf_counter()
    for item in items:
        to_item = await store_history(backend, item)
        answers = set(item["answer"])
        row: dict[str, Any] = {
            "id": item["id"],
            "split": item["split"],
            "lang": item["lang"],
            "kind": item["kind"],
            "period": None,
        }
        now = parse_time(item["now"])
        period = time_in(item["question"], now) if now else None
        if isinstance(period, EventPeriod):
            row["period"] = [period.relation, period.event]
        elif period is not None:
            row["period"] = [period.start.date().isoformat(), period.end.date().isoformat()]
        for side, with_period in (("before", False), ("after", True)):
            found = [to_item.get(i, "?") for i in await ask(backend, item, with_period=with_period)]
            row[side] = found
            row[f"{side}_first_right"] = bool(found) and found[0] in answers
            row[f"{side}_shown"] = bool(answers & set(found))
        rows.append(row)
    seconds = time.perf_counter() - started

    results: dict[str, Any] = {}
    for split in ("dev", "held-out"):
        groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for row in rows:
            if row["split"] != split:
                continue
            group = "event" if row["kind"] in EVENT_KINDS else "calendar"
            group = "no-time" if row["kind"] == "no-time" else group
            groups[group].append(row)
            groups["all"].append(row)
        results[split] = {
            group: {
                side: {
                    "first_right": share(members, f"{side}_first_right"),
                    "shown": share(members, f"{side}_shown"),
                }
                for side in ("before", "after")
            }
            for group, members in sorted(groups.items())
        }
    return {
        "command": "python benchmarks/temporal.py " + " ".join(sys.argv[1:]),
        "embedder": args.embedder,
        "top_k": TOP_K,
        "items": len(rows),
        "seconds": round(seconds, 1),
        "results": results,
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--embedder", choices=("e5", "hash"), default="e5")
    parser.add_argument("--limit", type=int, default=None, help="The first N items only.")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    report = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    for split, groups in report["results"].items():
        for group, sides in groups.items():
            before, after = sides["before"]["first_right"], sides["after"]["first_right"]
            print(
                f"{split:8} {group:8} first right: before {before['right']}/{before['of']}, "
                f"after {after['right']}/{after['of']}"
            )


if __name__ == "__main__":
    main()
