r"""mem0's answers turned into :class:`~.._memories.hit.MemoryHit`\ s.

mem0's OSS and hosted clients answer ``search`` and ``get_all`` in slightly
different shapes (a dict with ``results`` or a bare list; ``memory``, ``text``
or ``data`` for the text); :func:`normalise_hits` reads them all.
"""

from __future__ import annotations

from typing import Any

from .._memories.hit import MemoryHit

__all__ = ["entries_of", "normalise_hits", "results_of"]


def results_of(raw: Any) -> list[Any]:
    """The result entries of a mem0 answer (``{"results": [...]}`` or a bare list)."""
    if isinstance(raw, dict):
        raw = raw.get("results", [])
    return list(raw) if isinstance(raw, list) else []


def normalise_hits(raw: Any) -> list[MemoryHit]:
    """Turn mem0's search/get_all answer (OSS or hosted shape) into hits."""
    hits: list[MemoryHit] = []
    for item in results_of(raw):
        if isinstance(item, str):
            if item.strip():
                hits.append(MemoryHit(id=None, memory=item))
            continue
        if not isinstance(item, dict):
            continue
        text = item.get("memory") or item.get("text") or item.get("data")
        if not text:
            continue
        score = item.get("score")
        hits.append(
            MemoryHit(
                id=item.get("id"),
                memory=str(text),
                score=float(score) if isinstance(score, int | float) else None,
                created_at=_as_text(item.get("created_at")),
                updated_at=_as_text(item.get("updated_at")),
                metadata=item["metadata"] if isinstance(item.get("metadata"), dict) else None,
            )
        )
    return hits


def _as_text(value: Any) -> str | None:
    return None if value is None else str(value)


def entries_of(raw: Any) -> list[dict[str, Any]]:
    """The dict entries of a mem0 answer."""
    return [entry for entry in results_of(raw) if isinstance(entry, dict)]
