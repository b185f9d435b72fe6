"""One fact, one memory: does write-time consolidation merge repeats and only repeats?

Two parts, on the pair set ``benchmarks/data/consolidation_pairs.jsonl``
(pairs of memories that state the same fact, and pairs that must stay apart:
another person, negation, another time, other numbers, another object or
relation, more detail, a swapped comparison):

1. **The rule.** Each pair is judged by ``same_fact`` with e5 embeddings
   (the offline default embedder; the user's name read as "User"), without
   embeddings (hosted mem0, no embedder at hand) and by release 0.2's note
   rule. The thresholds are chosen by 5-fold cross-validation (fewest wrong
   merges on the training folds, then most right ones, then the strictest);
   the figures are the held-out folds' totals.
2. **The store.** Per pair, a fresh scope of real mem0 on the embedded store
   (Qdrant Edge, e5) holds the first memory; the second is added and
   :class:`Consolidator` runs as the write path runs it (candidate search,
   rule, embeddings of open pairs, marks). Counted: pairs merged wrongly,
   pairs left duplicated, and the seconds consolidation adds to a write.

Run from the repository root::

    python benchmarks/consolidation.py            # ~10 min on 2 busy cores
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from agentscope_mem0._recall.same_fact import (
    DEFAULT_SAME_FACT_RULE,
    SameFactRule,
    as_user,
    cosine,
    fact_shape,
    same_fact,
    user_names,
)
from agentscope_mem0._recall.similar import are_near_duplicates, memory_words

ROOT = Path(__file__).resolve().parents[1]
PAIRS = ROOT / "benchmarks" / "data" / "consolidation_pairs.jsonl"
OUT = ROOT / "docs" / "benchmarks" / "consolidation.json"
PLOT = ROOT / "docs" / "benchmarks" / "consolidation.png"

GRID = {
    "lexical": (0.6, 0.67, 0.75, 0.8, 0.9, 1.0),
    "with_vectors": (0.5, 0.67, 0.75, 1.0),
    "cosine": (0.9, 0.93, 0.95, 0.96, 0.97, 0.98, 0.99),
}
FOLDS = 5


def load_pairs(path: Path = PAIRS) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def embed_pairs(pairs: list[dict[str, Any]]) -> dict[int, float]:
    """e5 cosine similarity per pair, the user's names read as "User"."""
    from agentscope_mem0.local._embedder import OfflineE5Embedding

    model = OfflineE5Embedding()
    texts: dict[str, None] = {}
    for pair in pairs:
        names = user_names(pair["user"], [pair["a"], pair["b"]])
        for key in ("a", "b"):
            texts[as_user(pair[key], names)] = None
    vectors = dict(zip(texts, model.embed_sync(list(texts), query=True), strict=True))
    out = {}
    for pair in pairs:
        names = user_names(pair["user"], [pair["a"], pair["b"]])
        a, b = (vectors[as_user(pair[key], names)] for key in ("a", "b"))
        out[pair["id"]] = cosine(a, b) or 0.0
    return out


def judged(pair: dict[str, Any], rule: SameFactRule, similarity: float | None) -> bool:
    names = user_names(pair["user"], [pair["a"], pair["b"]])
    return same_fact(
        fact_shape(pair["a"], names), fact_shape(pair["b"], names), similarity=similarity, rule=rule
    )


def score(
    pairs: list[dict[str, Any]], rule: SameFactRule, sims: dict[int, float] | None
) -> dict[str, int]:
    wrong = right = 0
    for pair in pairs:
        merged = judged(pair, rule, sims[pair["id"]] if sims else None)
        wrong += merged and not pair["same"]
        right += merged and pair["same"]
    return {"wrong": wrong, "right": right, "same": sum(p["same"] for p in pairs)}


def choose(pairs: list[dict[str, Any]], sims: dict[int, float] | None) -> SameFactRule:
    """The rule with the fewest wrong merges, then the most right ones, then the strictest."""
    best: tuple[Any, ...] | None = None
    chosen = DEFAULT_SAME_FACT_RULE
    if sims:  # the words' threshold is the one chosen without embeddings
        grid = {**GRID, "lexical": (choose(pairs, None).lexical,)}
    else:
        grid = {**GRID, "with_vectors": (1.0,), "cosine": (1.0,)}
    for lexical, with_vectors, cos in itertools.product(*grid.values()):
        rule = SameFactRule(lexical=lexical, with_vectors=with_vectors, cosine=cos)
        got = score(pairs, rule, sims)
        key = (-got["wrong"], got["right"], lexical, with_vectors, cos)
        if best is None or key > best:
            best, chosen = key, rule
    return chosen


def folds(pairs: list[dict[str, Any]], k: int = FOLDS) -> list[list[dict[str, Any]]]:
    """``k`` folds, each kind of pair spread evenly (fixed seed)."""
    rng = random.Random(23)
    out: list[list[dict[str, Any]]] = [[] for _ in range(k)]
    by_kind: dict[tuple[bool, str], list[dict[str, Any]]] = {}
    for pair in pairs:
        by_kind.setdefault((pair["same"], pair["kind"]), []).append(pair)
    i = 0
    for group in by_kind.values():
        rng.shuffle(group)
        for pair in group:
            out[i % k].append(pair)
            i += 1
    return out


def cross_validate(pairs: list[dict[str, Any]], sims: dict[int, float] | None) -> dict[str, Any]:
    parts = folds(pairs)
    wrong = right = 0
    wrong_kinds: Counter[str] = Counter()
    chosen = []
    for i, held in enumerate(parts):
        train = [p for j, part in enumerate(parts) if j != i for p in part]
        rule = choose(train, sims)
        chosen.append(_rule_dict(rule))
        for pair in held:
            merged = judged(pair, rule, sims[pair["id"]] if sims else None)
            if merged and not pair["same"]:
                wrong += 1
                wrong_kinds[pair["kind"]] += 1
            right += merged and pair["same"]
    same = sum(p["same"] for p in pairs)
    return {
        "wrong_merges": wrong,
        "wrong_by_kind": dict(wrong_kinds),
        "merged": right,
        "left_duplicated": same - right,
        "same_pairs": same,
        "apart_pairs": len(pairs) - same,
        "rules_per_fold": chosen,
    }


def _rule_dict(rule: SameFactRule) -> dict[str, float]:
    return {"lexical": rule.lexical, "with_vectors": rule.with_vectors, "cosine": rule.cosine}


def note_rule(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """Release 0.2's near-duplicate rule of the note, for comparison."""
    wrong = right = 0
    for pair in pairs:
        merged = are_near_duplicates(memory_words(pair["a"]), memory_words(pair["b"]))
        wrong += merged and not pair["same"]
        right += merged and pair["same"]
    same = sum(p["same"] for p in pairs)
    return {"wrong_merges": wrong, "merged": right, "left_duplicated": same - right}


async def store_run(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each pair in its own scope of real mem0 on the embedded store; the write path's
    consolidation on the second memory."""
    from agentscope_mem0._mem0.backend import Mem0Backend
    from agentscope_mem0._mem0.clients import build_local_memory, close_memory
    from agentscope_mem0._mem0.query_cache import install_query_cache
    from agentscope_mem0._scope import Scope
    from agentscope_mem0._write.consolidate import Consolidator
    from agentscope_mem0.testing import ScriptedChatModel

    with tempfile.TemporaryDirectory() as folder:
        client = build_local_memory(ScriptedChatModel(), folder=Path(folder) / "data")
        install_query_cache(client)
        backend = Mem0Backend(client)
        consolidator = Consolidator(backend)
        wrong = right = 0
        seconds: list[float] = []
        add_seconds: list[float] = []
        for pair in pairs:
            scope = Scope(pair["user"], f"pair-{pair['id']}")
            await backend.add([{"role": "user", "content": pair["a"]}], scope, infer=False)
            started = time.perf_counter()
            results = await backend.add(
                [{"role": "user", "content": pair["b"]}], scope, infer=False
            )
            added = time.perf_counter()
            kept = await consolidator.consolidate(scope, results)
            seconds.append(time.perf_counter() - added)
            add_seconds.append(added - started)
            merged = len(kept) < len(results)
            wrong += merged and not pair["same"]
            right += merged and pair["same"]
        stats = consolidator.stats()
        close_memory(client)
    same = sum(p["same"] for p in pairs)
    return {
        "wrong_merges": wrong,
        "merged": right,
        "left_duplicated": same - right,
        "consolidate_seconds_p50": statistics.median(seconds),
        "consolidate_seconds_p95": sorted(seconds)[int(0.95 * (len(seconds) - 1))],
        "add_seconds_p50": statistics.median(add_seconds),
        "embeddings_per_write": stats["consolidation_embedded"] / len(pairs),
    }


def plot(result: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [
        ("note rule (0.2)", result["note_rule"]),
        ("no vectors (hosted)", result["cv_lexical"]),
        ("e5 vectors (default)", result["cv_vectors"]),
        ("store, write path", result["store"]),
    ]
    fig, ax = plt.subplots(figsize=(7, 3.2))
    labels = [name for name, _ in rows]
    y = range(len(rows))
    ax.barh([i + 0.2 for i in y], [r["merged"] for _, r in rows], 0.4, label="repeats merged")
    ax.barh([i - 0.2 for i in y], [r["wrong_merges"] for _, r in rows], 0.4, label="wrong merges")
    ax.set_yticks(list(y), labels)
    ax.set_xlabel(f"pairs ({result['same_pairs']} repeats, {result['apart_pairs']} distinct)")
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(PLOT, dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=Path, default=PAIRS)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--no-store", action="store_true", help="skip the store run")
    args = parser.parse_args()
    pairs = load_pairs(args.pairs)
    started = time.perf_counter()
    sims = embed_pairs(pairs)
    print(f"embedded {len(pairs)} pairs in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    result: dict[str, Any] = {
        "pairs": len(pairs),
        "same_pairs": sum(p["same"] for p in pairs),
        "apart_pairs": sum(not p["same"] for p in pairs),
        "note_rule": note_rule(pairs),
        "cv_lexical": cross_validate(pairs, None),
        "cv_vectors": cross_validate(pairs, sims),
        "chosen_on_all": _rule_dict(choose(pairs, sims)),
        "chosen_on_all_lexical": _rule_dict(choose(pairs, None)),
        "default_rule": _rule_dict(DEFAULT_SAME_FACT_RULE),
        "default_on_all": score(pairs, DEFAULT_SAME_FACT_RULE, sims),
        "default_on_all_lexical": score(pairs, DEFAULT_SAME_FACT_RULE, None),
    }
    if not args.no_store:
        result["store"] = asyncio.run(store_run(pairs))
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    if "store" in result:
        plot(result)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
