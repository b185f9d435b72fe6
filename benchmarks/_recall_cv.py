"""Choosing search settings by cross-validation over conversations.

Every variant's recall is known per question. A *split* fits on some
conversations and reports on the others: the variant with the best mean
recall on the fitting conversations is chosen, and its mean recall on the
held-out ones is what the split reports. With five conversations, fitting on
three and reporting on two, there are ten splits; the cross-validated figure
is their mean. It estimates what choosing on this data is worth on
conversations nobody tuned on. The in-sample figure chooses and reports on
all of them.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Split", "cross_validate", "in_sample", "mean_recall", "splits"]


@dataclass(frozen=True)
class Split:
    """One split's choice and what it scored."""

    fit: tuple[str, ...]
    held_out: tuple[str, ...]
    chosen: str
    fit_recall: float
    held_out_recall: float


def splits(conversations: Sequence[str], fit: int) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """Every way to fit on ``fit`` conversations and hold out the rest."""
    out = []
    for chosen in itertools.combinations(conversations, fit):
        held = tuple(c for c in conversations if c not in chosen)
        out.append((tuple(chosen), held))
    return out


def mean_recall(values: Mapping[str, Sequence[float]], conversations: Sequence[str]) -> float:
    """Mean over the questions of ``conversations`` (each question counts once)."""
    pooled = [v for c in conversations for v in values[c]]
    return sum(pooled) / len(pooled)


def best(
    recalls: Mapping[str, Mapping[str, Sequence[float]]],
    candidates: Sequence[str],
    conversations: Sequence[str],
) -> tuple[str, float]:
    """The candidate with the highest mean recall on ``conversations`` (first on ties)."""
    scored = [
        (mean_recall(recalls[name], conversations), -i, name) for i, name in enumerate(candidates)
    ]
    score, _, name = max(scored)
    return name, score


def cross_validate(
    recalls: Mapping[str, Mapping[str, Sequence[float]]],
    candidates: Sequence[str],
    conversations: Sequence[str],
    fit: int,
) -> list[Split]:
    """Choose among ``candidates`` on each split's fitting conversations.

    Args:
        recalls: Variant -> conversation -> one recall value per question.
        candidates: The variants to choose from, in order of preference on ties.
        conversations: All conversation ids.
        fit: How many conversations a split fits on.
    """
    out = []
    for fitting, held in splits(conversations, fit):
        name, fit_score = best(recalls, candidates, fitting)
        out.append(Split(fitting, held, name, fit_score, mean_recall(recalls[name], held)))
    return out


def in_sample(
    recalls: Mapping[str, Mapping[str, Sequence[float]]],
    candidates: Sequence[str],
    conversations: Sequence[str],
) -> tuple[str, float]:
    """The candidate chosen on all conversations, and its recall there."""
    return best(recalls, candidates, conversations)
