"""LoCoMo temporal questions (category 2): are the recalled turns dated right?

Every turn of each conversation of the LoCoMo development half is stored in
real mem0 (``AsyncMemory``, embedded Qdrant on disk, ``infer=False``), three
ways:

* ``no-date``: ``"<speaker>: <text>"``, written now (what a plain import does);
* ``said_at``: the same text, written with the session's date as ``said_at``
  (this package's timeline: ``created_at``/``said_at`` in the metadata);
* ``date-in-text``: ``"[<session date>] <speaker>: <text>"`` written now (the
  workaround ``note_recall.py`` uses).

Each category-2 question is searched (the question alone, top 10) and the
memory note is rendered. We count, over the questions' evidence turns:
``recall@10`` (the turn is among the hits) and ``dated@10`` (the turn is in
the note with its session's date: the note's date label for ``said_at``
and ``no-date``, the text for ``date-in-text``).

    python benchmarks/time_locomo.py --out docs/benchmarks/time-locomo.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

from agentscope_mem0 import build_mem0_config
from agentscope_mem0._mem0.backend import Mem0Backend
from agentscope_mem0._memories.lifecycle import time_label
from agentscope_mem0._recall.note import render_note_text
from agentscope_mem0._recall.recall import retrieve
from agentscope_mem0._scope import Scope
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

# The dev half of LoCoMo, beside the clone (docs/benchmarks/data.md: how to fetch it).
DEFAULT_DATA = (
    Path(__file__).resolve().parents[1].parent / "shared" / "data" / "locomo" / "locomo_dev.json"
)
VARIANTS = ("no-date", "said_at", "date-in-text")


def session_time(text: str) -> datetime:
    """LoCoMo's ``"1:56 pm on 8 May, 2023"`` as a datetime (read as UTC)."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def sessions(conversation: dict[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    out = []
    number = 1
    while f"session_{number}" in conversation:
        out.append((conversation[f"session_{number}_date_time"], conversation[f"session_{number}"]))
        number += 1
    return out


def evidence(qa: dict[str, Any]) -> set[str]:
    return {p.strip() for item in qa.get("evidence", []) for p in str(item).split(";") if p.strip()}


async def run_variant(variant: str, data: list[dict[str, Any]], folder: Path) -> dict[str, Any]:
    from mem0 import AsyncMemory

    memory = AsyncMemory(
        config=build_mem0_config(
            chat_model=ScriptedChatModel(),
            embedding_model=HashEmbedding(),
            mem0_config={
                "vector_store": {
                    "provider": "qdrant",
                    "config": {"path": str(folder), "on_disk": True, "collection_name": "t"},
                },
                "history_db_path": str(folder / "history.db"),
            },
        )
    )
    backend = Mem0Backend(memory)
    found = dated = total = questions = 0
    started = time.perf_counter()
    for sample in data:
        scope = Scope(sample["sample_id"])
        turn_of: dict[str, tuple[str, str, str]] = {}  # memory id -> (dia_id, day, date)
        for when, turns in sessions(sample["conversation"]):
            said = session_time(when)
            for turn in turns:
                text = f"{turn['speaker']}: {turn['text']}"
                if variant == "date-in-text":
                    text = f"[{when}] {text}"
                messages: list[dict[str, Any]] = [{"role": "user", "content": text}]
                dated_by = said if variant == "said_at" else None
                stored = await backend.add(messages, scope, infer=False, said_at=dated_by)
                for item in stored:
                    turn_of[str(item["id"])] = (turn["dia_id"], f"{said:%Y-%m-%d}", when)
        for qa in sample["qa"]:
            gold = evidence(qa)
            if qa.get("category") != 2 or not gold:
                continue
            questions += 1
            hits = await retrieve(backend, scope, qa["question"], top_k=10)
            note = render_note_text(hits, max_tokens=None) or ""
            for hit in hits:
                dia, day, when = turn_of.get(hit.id or "", ("", "", ""))
                if dia not in gold:
                    continue
                found += 1
                in_note = hit.memory[:40] in note
                if variant == "date-in-text":
                    dated += in_note and when in hit.memory
                else:
                    label = time_label(hit) or ""
                    dated += in_note and label.startswith(day)
            total += len(gold)
    return {
        "variant": variant,
        "questions": questions,
        "evidence_turns": total,
        "recall@10": round(found / total, 4),
        "dated@10": round(dated / total, 4),
        "seconds": round(time.perf_counter() - started, 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=None, help="first N only")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    data = json.loads(args.data.read_text())[: args.conversations]
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for variant in VARIANTS:
            result = await run_variant(variant, data, Path(tmp) / variant)
            results.append(result)
            print(json.dumps(result), file=sys.stderr)
    report = {"command": " ".join(["python", *sys.argv]), "embedder": "hash", "results": results}
    text = json.dumps(report, indent=2)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    asyncio.run(main())
