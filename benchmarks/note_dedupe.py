"""Does merging repeated memories in the note lose evidence?

The note merges memories that state the same fact in other words
(``agentscope_mem0._recall.dedupe``), keeping the newest. A merge that joined two
memories which differ in meaning would drop one of them; on LoCoMo that shows
up as an evidence turn missing from the note. This benchmark stores every turn
of the LoCoMo development half in real mem0 (``infer=False``, as
``note_recall.py`` does), searches with each question (categories 1-4) and
counts the evidence turns left in the top 5 and 10 hits:

* ``raw``: the hits as mem0 returned them;
* ``exact``: repeats with the same normalised text merged (release 0.1);
* ``words``: the same fact by its words merged as well (``dedupe_hits``);
* ``meaning``: and the pairs the words leave open by their embeddings (the
  read path's ``dedupe_by_meaning``, the store's own embedder, no budget).

It also counts how many hits each rule merged away. Run from the repository
root (LoCoMo is read in place, never copied)::

    python benchmarks/note_dedupe.py --embedder e5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from note_recall import (
    DEFAULT_DATA,
    KS,
    evidence_ids,
    make_embedding,
    make_memory,
    recall_at,
    store_conversation,
)

from agentscope_mem0._mem0.backend import Mem0Backend
from agentscope_mem0._memories.hit import MemoryHit
from agentscope_mem0._recall.dedupe import dedupe_by_meaning, dedupe_hits, memory_key
from agentscope_mem0._scope import Scope
from agentscope_mem0.testing import ScriptedChatModel

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "benchmarks" / "note-dedupe.json"


def exact_dedupe(hits: list[MemoryHit]) -> list[MemoryHit]:
    """Release 0.1's rule: the same normalised text counts once."""
    seen: set[str] = set()
    out = []
    for hit in hits:
        key = memory_key(hit.memory)
        if key and key not in seen:
            seen.add(key)
            out.append(hit)
    return out


RULES = ("raw", "exact", "words", "meaning")


async def deduped(rule: str, hits: list[MemoryHit], backend: Mem0Backend, user: str) -> list[Any]:
    if rule == "raw":
        return list(hits)
    if rule == "exact":
        return exact_dedupe(hits)
    if rule == "words":
        return dedupe_hits(hits, user_id=user)
    return await dedupe_by_meaning(hits, user_id=user, embed=backend.embed, budget=None)


async def run(data: list[dict[str, Any]], embedder: str, folder: Path) -> dict[str, Any]:
    backend = Mem0Backend(make_memory(folder, make_embedding(embedder), ScriptedChatModel()))
    sums = {f"{rule}@{k}": 0.0 for rule in RULES for k in KS}
    merged = {f"{rule}@{k}": 0 for rule in RULES for k in KS}
    lost_examples: list[dict[str, str]] = []
    questions = 0
    started = time.perf_counter()
    for sample in data:
        scope = Scope(sample["sample_id"])
        ids = await store_conversation(backend, scope, sample["conversation"])
        for qa in sample["qa"]:
            gold = evidence_ids(qa)
            if qa.get("category") == 5 or not gold:
                continue
            hits = await backend.search(qa["question"], scope, top_k=max(KS))
            questions += 1
            for k in KS:
                for rule in RULES:
                    kept = await deduped(rule, hits[:k], backend, scope.user_id)
                    sums[f"{rule}@{k}"] += recall_at(kept, ids, gold, k)
                    merged[f"{rule}@{k}"] += len(hits[:k]) - len(kept)
                if len(lost_examples) < 10:
                    meant = await deduped("meaning", hits[:k], backend, scope.user_id)
                    kept_ids = {h.id for h in meant}
                    for hit in exact_dedupe(hits[:k]):
                        if hit.id not in kept_ids and ids.get(hit.id or "") in gold:
                            lost_examples.append({"question": qa["question"], "lost": hit.memory})
        print(f"{sample['sample_id']}: {len(ids)} turns, {questions} questions", file=sys.stderr)
    return {
        "embedder": embedder,
        "questions": questions,
        "seconds": round(time.perf_counter() - started, 1),
        "recall": {key: round(value / questions, 4) for key, value in sums.items()},
        "hits_merged_per_question": {
            key: round(value / questions, 3) for key, value in merged.items()
        },
        "evidence_lost_examples": lost_examples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--embedder", choices=("e5", "hash"), default="e5")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    data = json.loads(args.data.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(run(data, args.embedder, Path(tmp)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
