"""How the package's search on pgvector ranks, against meaning alone and words alone.

Every turn of the LoCoMo dev half is stored verbatim (``infer=False``, one
memory per turn, the offline e5 model, vectors cached on disk) in one
pgvector table through the package's client (``build_memory`` with
``pgvector_config``), each conversation as one user. Each question is then
answered these ways, side by side, top 10:

* **by meaning alone**: mem0's own pgvector search (``PGVector.search``);
* **the package's search**: mem0's ``search`` on the package's
  ``PgvectorStore``, meaning and words fused with the embedded store's
  settings, as every reply with an embedded query searches;
* **by any of its words**: what a reply gets when the busy embedder refuses
  its query (``PgvectorStore.search_keywords``: PostgreSQL's English
  full-text search, any word of the question, ranked by ``ts_rank_cd``);
* **by all of its words**: mem0's own pgvector keyword search
  (``keyword_search``, every word of the question);
* **fused** over a grid: the best 60 by meaning and the best 60 by any word,
  fused by weighted reciprocal rank (``PgvectorStore.search_fused``), for
  each rank constant and dense weight of the grid.

Whether choosing the fused setting here would beat the embedded store's
settings is checked by cross-validation over the conversations (fit on
three, report on the other two, all ten splits; ``_recall_cv.py``): the
report gives the held-out figure of that choice beside the in-sample one.

Recall@k is the share of a question's evidence turns among the first k,
categories 1-4, averaged over questions (as ``embedded_recall.py``).

    python benchmarks/pgvector_search.py --pg-dsn <dsn> \
        --out docs/benchmarks/pgvector-search.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import platform
import sys
import time
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _locomo import CachedE5Embedding, load_conversations
from _recall_cv import cross_validate, in_sample
from _recall_score import TOP_K, recalls, summary
from _recall_stores import rank_all, said_at, store_turns
from mem0.vector_stores.pgvector import PGVector

from agentscope_mem0._mem0.clients import build_memory, close_memory
from agentscope_mem0.backends import pgvector_config, prepare_pgvector
from agentscope_mem0.testing import ScriptedChatModel

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo"

logger = logging.getLogger("pgvector_search")

# Candidates per ranking, as mem0 asks its store for max(4 x top_k, 60).
CANDIDATES = 60
GRID_K = (2, 10, 60)
GRID_DENSE_WEIGHT = (0.5, 0.7, 1.0, 1.5)


def _by_store(
    search: Any, to_turn: dict[str, str], conversations: list[dict[str, Any]]
) -> tuple[dict[str, list[list[str]]], float]:
    """Each question through ``search(question, top_k, filters)``, straight to the store."""
    out: dict[str, list[list[str]]] = {}
    started, count = time.perf_counter(), 0
    for conv in conversations:
        rows = []
        for q in conv["questions"]:
            hits = search(q["question"], TOP_K, {"user_id": conv["id"]}) or []
            rows.append([to_turn.get(str(h.id), "?") for h in hits])
            count += 1
        out[conv["id"]] = rows
    return out, (time.perf_counter() - started) / max(count, 1)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    conversations = load_conversations(args.data, args.limit_conversations)
    for conv in conversations:
        for position, turn in enumerate(conv["turns"]):
            turn["said_at"] = said_at(turn["date"], position)
    model = CachedE5Embedding()
    model.prepare([q["question"] for c in conversations for q in c["questions"]], query=True)
    model.prepare([t["text"] for c in conversations for t in c["turns"]], query=False)

    collection = f"kw_{uuid.uuid4().hex[:12]}"
    config = pgvector_config(args.pg_dsn, dims=model.dimensions, collection=collection)
    prepare_pgvector(config)
    memory = build_memory(chat_model=ScriptedChatModel(), embedding_model=model, mem0_config=config)
    store = memory.vector_store
    try:
        to_turn, fill_s = await store_turns(memory, conversations)
        logger.info("stored %d turns in %.0f s", len(to_turn), fill_s)

        def meaning(q: str, k: int, f: dict[str, Any]) -> Any:
            vector = model.embed_sync([q], query=True)[0]
            return PGVector.search(store, q, vector, CANDIDATES, f)[:k]

        ways = {
            "by meaning alone (mem0's PGVector.search)": _by_store(meaning, to_turn, conversations),
            "the package's search (meaning and words fused)": await rank_all(
                memory, to_turn, conversations
            ),
            "by any of its words (PgvectorStore.search_keywords)": _by_store(
                store.search_keywords, to_turn, conversations
            ),
            "by all of its words (mem0's keyword_search)": _by_store(
                lambda q, k, f: store.keyword_search(q, top_k=k, filters=f), to_turn, conversations
            ),
        }
        for rrf_k in args.grid_k:
            for weight in args.grid_dense_weight:

                def fused(q: str, k: int, f: dict[str, Any], rrf_k=rrf_k, weight=weight) -> Any:
                    vector = model.embed_sync([q], query=True)[0]
                    hits = store.search_fused(
                        q, vector, CANDIDATES, f, rrf_k=rrf_k, dense_weight=weight
                    )
                    return [hit for hit, _cosine in hits[:k]]

                ways[f"fused k={rrf_k} dense weight={weight}"] = _by_store(
                    fused, to_turn, conversations
                )
    finally:
        try:  # the run's own tables, memories and entity links
            for table in (store, memory.entity_store):
                table.delete_col()
        finally:
            close_memory(memory)
    rows = {}
    for name, (rankings, seconds) in ways.items():
        row = summary(rankings, conversations)
        row["ms_per_search"] = round(seconds * 1000, 2)
        rows[name] = row
        logger.info("%s: recall@10 %s", name, row["recall@10"])
    per_way = {
        name: recalls(rankings, conversations, TOP_K) for name, (rankings, _) in ways.items()
    }
    ids = [c["id"] for c in conversations]
    fit = max(1, len(ids) * 3 // 5)
    chosen = {}
    for family, names in (
        ("fused settings", [n for n in ways if n.startswith("fused")]),
        ("every way", list(ways)),
    ):
        folds = cross_validate(per_way, names, ids, fit) if len(ids) > 1 else []
        choice, score = in_sample(per_way, names, ids)
        chosen[family] = {
            "cv_recall@10": (
                round(sum(f.held_out_recall for f in folds) / len(folds), 4) if folds else None
            ),
            "chosen_in_splits": sorted({f.chosen for f in folds}),
            "in_sample_choice": choice,
            "in_sample_recall@10": round(score, 4),
        }
        logger.info("%s: %s", family, chosen[family])
    return {
        "conversations": [c["id"] for c in conversations],
        "questions": sum(len(c["questions"]) for c in conversations),
        "turns": sum(len(c["turns"]) for c in conversations),
        "store": f"{type(store).__module__}.{type(store).__qualname__}",
        "rows": rows,
        "chosen": chosen,
        "candidates": CANDIDATES,
        "seconds_to_store": round(fill_s, 1),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_at_start": load_at_start,
            "load_at_end": [round(x, 2) for x in os.getloadavg()],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("data", nargs="?", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--pg-dsn", default="", help="PostgreSQL with pgvector")
    parser.add_argument("--limit-conversations", type=int, default=None)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--grid-k", type=int, nargs="+", default=list(GRID_K))
    parser.add_argument(
        "--grid-dense-weight", type=float, nargs="+", default=list(GRID_DENSE_WEIGHT)
    )
    args = parser.parse_args()
    if not args.pg_dsn:
        sys.exit("pgvector_search needs --pg-dsn (PostgreSQL with the vector extension)")
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    result = asyncio.run(run(args))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for name, row in result["rows"].items():
        print(
            f"{name}: recall@5 {row['recall@5']}, recall@10 {row['recall@10']}, "
            f"by category {row['recall@10_by_category']}, {row['ms_per_search']} ms a search"
        )


if __name__ == "__main__":
    main()
