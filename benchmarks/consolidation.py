"""One fact, one memory: does write-time consolidation merge repeats and only repeats?

Two pair sets: ``data/consolidation_pairs.jsonl`` (273 pairs of memories that
state the same fact, and pairs that must stay apart: another person,
negation, another time, other numbers, another object or relation, more
detail, a swapped comparison), the set the rule was built with; and
``data/consolidation_pairs_fresh.jsonl`` (60 pairs written after the rule and
its thresholds were fixed, never used to choose anything).

Parts (``--parts``):

* ``rule``: each pair judged by ``same_fact`` as the judge-free path runs it:
  with e5 embeddings (the offline default; the user's name read as "User"),
  and without (hosted mem0). The
  thresholds are chosen by 5-fold cross-validation (fewest wrong merges on
  the training folds, then most right ones, then the strictest); the
  *held-out* figures are the held-out folds' totals. The default rule's
  figures on the whole set are reported apart (its thresholds were chosen
  on that set), and on the fresh set.
* ``store``: the judge-free path on real mem0 (embedded Qdrant Edge, e5):
  per pair a scope holds the first memory, the second is added and
  :class:`TimeJudge` without a model runs as the write worker runs it. Wrong merges,
  repeats left, seconds per write.
* ``judge``: the judge path on real mem0: per pair the time judge's
  background pass (one candidate search; the words, else the model's
  readings, vetoed by the words) with ``--judge-model``: ``scripted`` (the
  shipped RuleJudge, offline) or an OpenAI-compatible URL (the local
  Qwen2.5-Coder-1.5B by default: one sequential run, results kept per pair in
  ``--cache`` so an interrupted run goes on where it stopped).

Run from the repository root::

    python benchmarks/consolidation.py --parts rule store judge --judge-model scripted
    python benchmarks/consolidation.py --parts judge --sets fresh --skip-vetoed \\
        --judge-model http://127.0.0.1:8765/v1 --cache /tmp/consolidation-qwen.jsonl
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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agentscope_mem0._text.same_fact import (
    DEFAULT_SAME_FACT_RULE,
    SameFactRule,
    as_user,
    cosine,
    fact_shape,
    kept_apart,
    same_fact,
    user_names,
)

ROOT = Path(__file__).resolve().parents[1]
PAIRS = ROOT / "benchmarks" / "data" / "consolidation_pairs.jsonl"
FRESH = ROOT / "benchmarks" / "data" / "consolidation_pairs_fresh.jsonl"
OUT = ROOT / "docs" / "benchmarks" / "consolidation.json"
SAID = datetime(2024, 3, 10, 10, tzinfo=UTC)

GRID = {
    "lexical": (0.6, 0.67, 0.75, 0.8, 0.9, 1.0),
    "with_vectors": (0.5, 0.67, 0.75, 1.0),
    "cosine": (0.9, 0.93, 0.95, 0.96, 0.97, 0.98, 0.99),
}
FOLDS = 5


def load_pairs(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def counts(pairs: list[dict[str, Any]], merged: dict[int, bool]) -> dict[str, Any]:
    """Wrong merges, repeats merged and left, over ``pairs``."""
    wrong = [p for p in pairs if merged[p["id"]] and not p["same"]]
    same = sum(p["same"] for p in pairs)
    right = sum(merged[p["id"]] and p["same"] for p in pairs)
    return {
        "wrong_merges": len(wrong),
        "wrong_by_kind": dict(Counter(p["kind"] for p in wrong)),
        "wrong_pairs": [[p["a"], p["b"]] for p in wrong],
        "merged": right,
        "left_duplicated": same - right,
        "same_pairs": same,
        "apart_pairs": len(pairs) - same,
    }


# -- the rule ----------------------------------------------------------------------


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


def by_rule(
    pairs: list[dict[str, Any]], rule: SameFactRule, sims: dict[int, float] | None
) -> dict[int, bool]:
    return {p["id"]: judged(p, rule, sims[p["id"]] if sims else None) for p in pairs}


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
        got = counts(pairs, by_rule(pairs, rule, sims))
        key = (-got["wrong_merges"], got["merged"], lexical, with_vectors, cos)
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
    merged: dict[int, bool] = {}
    chosen = []
    parts = folds(pairs)
    for i, held in enumerate(parts):
        train = [p for j, part in enumerate(parts) if j != i for p in part]
        rule = choose(train, sims)
        chosen.append(_rule_dict(rule))
        merged.update(by_rule(held, rule, sims))
    return {**counts(pairs, merged), "rules_per_fold": chosen}


def _rule_dict(rule: SameFactRule) -> dict[str, float]:
    return {"lexical": rule.lexical, "with_vectors": rule.with_vectors, "cosine": rule.cosine}


def rule_part(pairs: list[dict[str, Any]], fresh: list[dict[str, Any]]) -> dict[str, Any]:
    started = time.perf_counter()
    sims = embed_pairs(pairs + fresh)
    print(f"embedded {len(pairs) + len(fresh)} pairs in {time.perf_counter() - started:.0f} s")
    rule = DEFAULT_SAME_FACT_RULE
    return {
        "default_rule": _rule_dict(rule),
        "held_out": {
            "e5": cross_validate(pairs, sims),
            "words_only": cross_validate(pairs, None),
        },
        "chosen_on_whole_set": {
            "e5": _rule_dict(choose(pairs, sims)),
            "words_only": _rule_dict(choose(pairs, None)),
        },
        "whole_set_default_rule": {
            "e5": counts(pairs, by_rule(pairs, rule, sims)),
            "words_only": counts(pairs, by_rule(pairs, rule, None)),
        },
        "fresh_default_rule": {
            "e5": counts(fresh, by_rule(fresh, rule, sims)),
            "words_only": counts(fresh, by_rule(fresh, rule, None)),
        },
    }


# -- on real mem0 -------------------------------------------------------------------


def seconds(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p95": round(ordered[max(0, round(0.95 * len(ordered)) - 1)], 3),
        "mean": round(statistics.fmean(ordered), 3),
    }


async def _pair_scope(backend: Any, pair: dict[str, Any], tag: str) -> tuple[Any, list[Any]]:
    """A scope of its own holding the pair's first memory; the second just stored."""
    from agentscope_mem0 import Scope

    scope = Scope(pair["user"], f"{tag}-{pair['id']}")
    older = [{"role": "user", "content": pair["a"]}]
    await backend.add(older, scope, infer=False, said_at=SAID - timedelta(days=30))
    newer = [{"role": "user", "content": pair["b"]}]
    return scope, await backend.add(newer, scope, infer=False, said_at=SAID)


async def store_part(sets: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The judge-free path: TimeJudge without a model after each write, on the embedded store."""
    from agentscope_mem0 import Mem0Backend, build_local_memory
    from agentscope_mem0._mem0.clients import close_memory
    from agentscope_mem0._mem0.query_cache import install_query_cache
    from agentscope_mem0._write.judge import TimeJudge
    from agentscope_mem0.testing import ScriptedChatModel

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as folder:
        client = build_local_memory(ScriptedChatModel(), folder=Path(folder) / "data")
        install_query_cache(client)
        backend = Mem0Backend(client)
        for name, pairs in sets.items():
            consolidator = TimeJudge(backend, None)
            merged: dict[int, bool] = {}
            took: list[float] = []
            for pair in pairs:
                scope, results = await _pair_scope(backend, pair, f"store-{name}")
                started = time.perf_counter()
                merged[pair["id"]] = await consolidator.judge(scope, results, SAID)
                took.append(time.perf_counter() - started)
            stats = consolidator.stats()
            out[name] = {
                **counts(pairs, merged),
                "seconds_per_write": seconds(took),
                "embeddings_per_write": stats["consolidation_embedded"] / len(pairs),
            }
        close_memory(client)
    return out


def judge_model(spec: str) -> Any:
    """The judge's chat model: the shipped RuleJudge, or a real one at a URL."""
    from agentscope_mem0.testing import ScriptedChatModel

    if spec == "scripted":
        return ScriptedChatModel()
    from agentscope.credential import OpenAICredential
    from agentscope.model import OpenAIChatModel
    from pydantic import SecretStr

    from agentscope_mem0 import StringContentFormatter

    return OpenAIChatModel(
        OpenAICredential(api_key=SecretStr("not-needed"), base_url=spec),
        model="qwen",
        stream=False,
        max_retries=0,
        parameters=OpenAIChatModel.Parameters(temperature=0.0),
        formatter=StringContentFormatter(),
    )


async def judge_part(
    sets: dict[str, list[dict[str, Any]]],
    spec: str,
    cache: Path | None,
    timeout: float,
    skip_vetoed: bool,
) -> dict[str, Any]:
    """The judge path: the time judge's background pass on each pair's second memory.

    With ``skip_vetoed``, pairs the words keep apart are not run: no model answer
    can merge them (the judge would still ask the model whether one changes the
    other, which is not measured here).
    """
    from agentscope_mem0 import Mem0Backend, build_local_memory
    from agentscope_mem0._mem0.clients import close_memory
    from agentscope_mem0.testing import ScriptedChatModel

    done: dict[str, dict[str, Any]] = {}
    if cache is not None and cache.exists():
        for line in cache.read_text().splitlines():
            row = json.loads(line)
            done[f"{row['set']}:{row['id']}"] = row
    model = judge_model(spec)
    out: dict[str, Any] = {"model": spec}
    with tempfile.TemporaryDirectory() as folder:
        client = build_local_memory(ScriptedChatModel(), folder=Path(folder) / "data")
        backend = Mem0Backend(client)
        for name, pairs in sets.items():
            rows = []
            for pair in pairs:
                key = f"{name}:{pair['id']}"
                if key not in done and skip_vetoed and _kept_apart(pair):
                    # Whatever the model reads, the words keep these two apart.
                    done[key] = {
                        "set": name,
                        "id": pair["id"],
                        "same": pair["same"],
                        "kind": pair["kind"],
                        "merged": False,
                        "route": "not run",
                    }
                if key not in done:
                    done[key] = await _judge_pair(backend, model, pair, name, timeout)
                    if cache is not None:
                        with cache.open("a") as file:
                            file.write(json.dumps(done[key]) + "\n")
                    row = done[key]
                    print(
                        f"{key} same={pair['same']} merged={row['merged']} by={row['route']} "
                        f"calls={row['model_calls']} {row['seconds']:.1f}s",
                        flush=True,
                    )
                rows.append(done[key])
            out[name] = _judge_summary(pairs, rows)
        close_memory(client)
    return out


async def _judge_pair(
    backend: Any, model: Any, pair: dict[str, Any], name: str, timeout: float
) -> dict[str, Any]:
    from agentscope_mem0._mem0.call_context import no_reply_waits
    from agentscope_mem0._observe.usage import TokenMeter
    from agentscope_mem0._write.judge import TimeJudge

    judge = TimeJudge(backend, model, timeout=timeout)
    judge.meter = TokenMeter(None)
    scope, results = await _pair_scope(backend, pair, f"judge-{name}")
    started = time.perf_counter()
    with no_reply_waits():  # as after a stored write: background work
        await judge.judge(scope, results, SAID)
    took = time.perf_counter() - started
    stats, tokens = judge.stats(), judge.meter.stats()
    calls = tokens.get("model_calls_judge", 0)
    merged = stats["judge_merged"] > 0
    return {
        "set": name,
        "id": pair["id"],
        "same": pair["same"],
        "kind": pair["kind"],
        "merged": merged,
        "route": ("model" if calls else "words") if merged else "-",
        "model_said_same": stats["judge_same"] > 0,
        "vetoed": stats["judge_vetoed"] > 0,
        "skipped": stats["judge_skipped"] > 0,
        "model_calls": calls,
        "tokens_in": tokens.get("tokens_in_judge", 0),
        "seconds": round(took, 3),
    }


def _kept_apart(pair: dict[str, Any]) -> bool:
    names = user_names(pair["user"], [pair["a"], pair["b"]])
    return kept_apart(fact_shape(pair["b"], names), fact_shape(pair["a"], names)) is not None


def _judge_summary(pairs: list[dict[str, Any]], every: list[dict[str, Any]]) -> dict[str, Any]:
    merged = {row["id"]: row["merged"] for row in every}
    rows = [row for row in every if row["route"] != "not run"]
    asked = [row for row in rows if row["model_calls"]]
    return {
        **counts(pairs, merged),
        "pairs_run": len(rows),
        "pairs_not_run_kept_apart_by_words": len(every) - len(rows),
        "merged_by_words": sum(row["route"] == "words" for row in rows),
        "merged_by_model": sum(row["route"] == "model" for row in rows),
        "model_said_same": {
            "repeats": sum(r["model_said_same"] and r["same"] for r in rows),
            "distinct": sum(r["model_said_same"] and not r["same"] for r in rows),
        },
        "vetoed": {
            "distinct_kept_apart": sum(r["vetoed"] and not r["same"] for r in rows),
            "repeats_kept_apart": sum(r["vetoed"] and r["same"] for r in rows),
        },
        "writes_skipped": sum(row["skipped"] for row in rows),
        "model_calls_per_write": round(sum(r["model_calls"] for r in rows) / len(rows), 2),
        "writes_without_a_model_call": len(rows) - len(asked),
        "seconds_per_write": seconds([row["seconds"] for row in rows]),
        "seconds_per_write_with_model_calls": seconds([r["seconds"] for r in asked])
        if asked
        else None,
    }


# -- report ----------------------------------------------------------------------------


def plot(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows: list[tuple[str, dict[str, Any]]] = []
    rule = result.get("rule", {})
    if rule:
        rows += [
            ("words only, held-out folds", rule["held_out"]["words_only"]),
            ("words + e5, held-out folds", rule["held_out"]["e5"]),
            ("words + e5, fresh pairs", rule["fresh_default_rule"]["e5"]),
        ]
    for key, label in (("store", "no judge, real store"), ("judge_scripted", "judge (scripted)")):
        for name in ("set", "fresh"):
            if name in result.get(key, {}):
                rows.append(
                    (
                        f"{label}, {'fresh pairs' if name == 'fresh' else 'whole set'}",
                        result[key][name],
                    )
                )
    for key, part in result.items():
        if key.startswith("judge_") and key != "judge_scripted":
            for name in ("set", "fresh"):
                if name in part:
                    rows.append((f"judge ({part['model_name']}), {name}", part[name]))
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(rows) + 1.2))
    y = list(range(len(rows)))[::-1]
    share = [100 * r["merged"] / max(r["same_pairs"], 1) for _, r in rows]
    wrong = [r["wrong_merges"] for _, r in rows]
    ax.barh(y, share, color="#4a7bb7", height=0.6)
    for yi, value, bad, (_, r) in zip(y, share, wrong, rows, strict=True):
        ax.text(
            value + 1,
            yi,
            f"{r['merged']}/{r['same_pairs']} merged, {bad} wrong",
            va="center",
            fontsize=8,
            color="#b3261e" if bad else "black",
        )
    ax.set_yticks(y, [label for label, _ in rows], fontsize=8)
    ax.set_xlim(0, 135)
    ax.set_xlabel("repeats merged (%)")
    ax.set_title("Repeats merged, and distinct facts merged by mistake (goal: 0)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


_PARTS = ("rule", "store", "judge_scripted", "judge_qwen")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--parts", nargs="+", default=["rule", "store", "judge"], choices=["rule", "store", "judge"]
    )
    parser.add_argument(
        "--judge-model",
        default="scripted",
        help="'scripted' or an OpenAI-compatible base URL (model 'qwen')",
    )
    parser.add_argument(
        "--judge-timeout",
        type=float,
        default=600.0,
        help="seconds per model call (the library's default is 120)",
    )
    parser.add_argument("--cache", type=Path, help="per-pair results of the judge part")
    parser.add_argument(
        "--skip-vetoed",
        action="store_true",
        help="judge part: do not run pairs the words keep apart (a slow real model)",
    )
    parser.add_argument(
        "--sets",
        nargs="+",
        default=["set", "fresh"],
        choices=["set", "fresh"],
        help="pair sets to run (a slow real model: the fresh set alone)",
    )
    parser.add_argument("--pairs", type=Path, default=PAIRS, help="the pair set (JSON lines)")
    parser.add_argument(
        "--fresh-pairs", type=Path, default=FRESH, help="the fresh pair set (JSON lines)"
    )
    parser.add_argument("--out", type=Path, default=OUT, help="the JSON; the plot goes beside it")
    args = parser.parse_args()
    pairs, fresh = load_pairs(args.pairs), load_pairs(args.fresh_pairs)
    earlier = json.loads(args.out.read_text()) if args.out.exists() else {}
    # Parts not run this time keep their last results.
    result: dict[str, Any] = {k: v for k, v in earlier.items() if k in _PARTS}
    result.update({"pairs": len(pairs), "fresh_pairs": len(fresh)})
    sets = {name: found for name, found in (("set", pairs), ("fresh", fresh)) if name in args.sets}
    if "rule" in args.parts:
        result["rule"] = rule_part(pairs, fresh)
    if "store" in args.parts:
        result["store"] = asyncio.run(store_part(sets))
    if "judge" in args.parts:
        name = "scripted" if args.judge_model == "scripted" else "qwen"
        part = asyncio.run(
            judge_part(sets, args.judge_model, args.cache, args.judge_timeout, args.skip_vetoed)
        )
        part["skip_vetoed"] = args.skip_vetoed
        part["model_name"] = (
            "RuleJudge (scripted)" if name == "scripted" else "Qwen2.5-Coder-1.5B, local"
        )
        result[f"judge_{name}"] = part
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    plot(result, args.out.with_suffix(".png"))
    print(json.dumps({k: v for k, v in result.items()}, indent=2)[:4000], file=sys.stderr)


if __name__ == "__main__":
    main()
