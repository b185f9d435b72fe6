"""Recall of the LoCoMo benchmark's rankings, and choosing settings by cross-validation.

A ranking is, per conversation, the turn ids found for each question; recall@k
is the share of a question's evidence turns among its first k, over the
answerable questions (categories 1-4).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from typing import Any

from _recall_cv import cross_validate, in_sample, mean_recall

KS = (5, 10)
TOP_K = max(KS)


def recalls(
    rankings: dict[str, list[list[str]]], conversations: list[dict[str, Any]], k: int
) -> dict[str, list[float]]:
    """Conversation -> recall@k of each answerable (category 1-4) question."""
    out: dict[str, list[float]] = {}
    for conv in conversations:
        values = []
        for ranking, q in zip(rankings[conv["id"]], conv["questions"], strict=True):
            if q["category"] != 5:
                values.append(len(set(ranking[:k]) & set(q["evidence"])) / len(q["evidence"]))
        out[conv["id"]] = values
    return out


def summary(rankings: dict[str, list[list[str]]], conversations: list[dict[str, Any]]) -> dict:
    ids = [c["id"] for c in conversations]
    row: dict[str, Any] = {}
    for k in KS:
        per_conv = recalls(rankings, conversations, k)
        row[f"recall@{k}"] = round(mean_recall(per_conv, ids), 4)
        row[f"recall@{k}_by_conversation"] = {c: round(mean_recall(per_conv, [c]), 4) for c in ids}
    at_top = recalls(rankings, conversations, TOP_K)
    by_cat = _by_category(at_top, categories_of(conversations), ids)
    row["recall@10_by_category"] = {c: round(v, 4) for c, v in by_cat.items()}
    return row


def categories_of(conversations: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Conversation -> the category of each question :func:`recalls` scores, in order."""
    return {
        conv["id"]: [str(q["category"]) for q in conv["questions"] if q["category"] != 5]
        for conv in conversations
    }


def _by_category(
    values: dict[str, list[float]], categories: dict[str, list[str]], conversations: Iterable[str]
) -> dict[str, float]:
    """Mean recall per category over the questions of ``conversations``."""
    pooled: dict[str, list[float]] = {}
    for conv in conversations:
        for category, value in zip(categories[conv], values[conv], strict=True):
            pooled.setdefault(category, []).append(value)
    return {c: sum(v) / len(v) for c, v in sorted(pooled.items())}


def choose(
    grid: dict[str, dict[str, Any]],
    per_variant: dict[str, dict[str, list[float]]],
    categories: dict[str, list[str]],
    fit: int,
) -> dict[str, Any]:
    """Cross-validated choice within each family, and within the families kept.

    Each choice also gives recall@10 by category: in sample (the variant
    chosen on every conversation, scored on them) and cross-validated (each
    split's choice scored on its held-out conversations, averaged over the
    splits as the overall figure is)."""
    conversations = list(categories)
    families = sorted({v["family"] for v in grid.values()} - {"fusion"})
    fusion = [n for n, v in grid.items() if v["family"] == "fusion"]

    def evaluate(candidates: list[str]) -> dict[str, Any]:
        folds = cross_validate(per_variant, candidates, conversations, fit)
        name, score = in_sample(per_variant, candidates, conversations)
        held = [_by_category(per_variant[f.chosen], categories, f.held_out) for f in folds]
        return {
            "cv_recall@10": round(sum(f.held_out_recall for f in folds) / len(folds), 4),
            "cv_recall@10_by_category": {
                c: round(statistics.fmean(fold[c] for fold in held if c in fold), 4)
                for c in sorted({c for fold in held for c in fold})
            },
            "in_sample_choice": name,
            "in_sample_recall@10": round(score, 4),
            "in_sample_recall@10_by_category": {
                c: round(v, 4)
                for c, v in _by_category(per_variant[name], categories, conversations).items()
            },
            "folds": [
                {
                    "fit": list(f.fit),
                    "held_out": list(f.held_out),
                    "chosen": f.chosen,
                    "fit_recall@10": round(f.fit_recall, 4),
                    "held_out_recall@10": round(f.held_out_recall, 4),
                }
                for f in folds
            ],
        }

    out: dict[str, Any] = {"fusion": evaluate(fusion)}
    kept = []
    for family in families:
        members = [n for n, v in grid.items() if v["family"] == family]
        out[f"fusion+{family}"] = evaluate(fusion + members)
        if out[f"fusion+{family}"]["cv_recall@10"] > out["fusion"]["cv_recall@10"]:
            kept.append(family)
    final = fusion + [n for n, v in grid.items() if v["family"] in kept]
    out["kept_families"] = kept
    out["final"] = evaluate(final)
    return out
