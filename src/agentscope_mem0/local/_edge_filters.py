"""mem0's filter dictionaries as Qdrant Edge filters.

mem0 2.2 passes one dict per call: the scope (``user_id``, ``agent_id``,
``run_id``, ``actor_id``) as plain values, and the user's metadata filters,
which may use operators (``eq``, ``ne``, ``gt``, ``gte``, ``lt``, ``lte``,
``in``, ``nin``, ``contains``, ``icontains``), a list for "any of", ``"*"``
for "any value", and the logical keys ``AND`` / ``OR`` / ``NOT`` (also
spelled ``$and`` / ``$or`` / ``$not``, mem0 renames some and keeps both).

A filter means here what it means on mem0's own Qdrant store (checked side
by side in ``tests/local/test_edge_filters.py``), so a memory found there is
found here:

* ``contains`` and ``icontains`` are Qdrant's text match: every word of the
  text is a whole word of the value, case-insensitively ("dark mode" finds
  "Dark Mode charts", "dar" finds nothing);
* a boolean matches booleans only (qdrant-edge-py 0.9 turns a Python
  ``bool`` into an integer, so it is passed as a numpy bool, which it keeps);
* a field that is absent satisfies no condition on it (``ne`` and ``nin``
  included), only a ``NOT`` of one;
* what mem0's Qdrant store refuses is refused here too, with a ``ValueError``
  saying why: a float, ``None`` or a dict to match exactly, booleans in a
  list, a list that mixes strings and integers, a text match on a non-string.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["build_filter"]

_LOGICAL = {"$or": "OR", "$not": "NOT", "$and": "AND", "AND": "AND", "OR": "OR", "NOT": "NOT"}
_RANGE_OPS = ("gt", "gte", "lt", "lte")
_OPERATORS = frozenset({"eq", "ne", "in", "nin", "contains", "icontains", *_RANGE_OPS})
_ISO_DATETIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2})?(\.\d+)?(Z|[+-]\d{2}:?\d{2})?)?$"
)


def build_filter(filters: dict[str, Any] | None) -> Any:
    """The Qdrant Edge ``Filter`` for a mem0 filter dict, or ``None`` for "everything".

    Raises:
        ValueError: An operator is unknown, range and other operators are
            mixed on one field, or a logical key does not hold a list of dicts.
    """
    from qdrant_edge import Filter

    if not filters:
        return None
    must: list[Any] = []
    should: list[Any] = []
    must_not: list[Any] = []
    seen: set[str] = set()
    for key, value in filters.items():
        logical = _LOGICAL.get(key)
        if logical is None:
            condition = _condition(key, value)
            if condition is not None:
                must.append(condition)
            continue
        if logical in seen:
            # mem0 2.2 keeps both "OR" and the "$or" it made from it.
            continue
        seen.add(logical)
        if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
            raise ValueError(f"{key} filter value must be a list of filter dicts, got {value!r}")
        built = [b for b in (build_filter(sub) for sub in value) if b is not None]
        {"AND": must, "OR": should, "NOT": must_not}[logical].extend(built)
    if not (must or should or must_not):
        return None
    return Filter(must=must or None, should=should or None, must_not=must_not or None)


def _condition(key: str, value: Any) -> Any:
    from qdrant_edge import FieldCondition, MatchAny, MatchExcept, MatchText, MatchValue

    if not isinstance(value, dict):
        if isinstance(value, str) and value == "*":
            return None
        if isinstance(value, list):
            return FieldCondition(key=key, match=MatchAny(any=_values(key, value)))
        return FieldCondition(key=key, match=MatchValue(_value(key, value)))
    ops = set(value)
    unknown = ops - _OPERATORS
    if unknown or not ops:
        raise ValueError(
            f"unsupported filter operator(s) for field {key!r}: {sorted(unknown) or '{}'}; "
            f"supported: {sorted(_OPERATORS)}"
        )
    ranges = ops & set(_RANGE_OPS)
    if ranges:
        if ops - ranges:
            raise ValueError(
                f"cannot mix range operators {sorted(ranges)} with {sorted(ops - ranges)} "
                f"for field {key!r}; combine them with AND"
            )
        return _range(key, {op: value[op] for op in _RANGE_OPS if op in value})
    # One operator per field, in mem0's Qdrant store's order of preference.
    if "eq" in value:
        return FieldCondition(key=key, match=MatchValue(_value(key, value["eq"])))
    if "ne" in value:
        return FieldCondition(key=key, match=MatchExcept(_values(key, [value["ne"]])))
    if "in" in value:
        return FieldCondition(key=key, match=MatchAny(any=_values(key, value["in"])))
    if "nin" in value:
        return FieldCondition(key=key, match=MatchExcept(_values(key, value["nin"])))
    text = value["contains"] if "contains" in value else value["icontains"]
    if not isinstance(text, str):
        raise ValueError(f"contains/icontains on {key!r} needs a string, got {text!r}")
    return FieldCondition(key=key, match=MatchText(text))


def _value(key: str, value: Any) -> Any:
    """An exact-match operand: a string, an integer or a boolean (kept a boolean)."""
    import numpy

    if isinstance(value, bool):
        # qdrant-edge-py 0.9 reads a Python bool as an integer; a numpy bool stays one.
        return numpy.bool_(value)
    if isinstance(value, str | int):
        return value
    raise ValueError(
        f"filter on {key!r}: an exact match takes a string, an integer or a boolean, "
        f"got {value!r} (use a range for numbers with a fraction)"
    )


def _values(key: str, values: Any) -> list[Any]:
    """A list operand (``in``, ``nin``, ``ne``): all strings or all integers."""
    if isinstance(values, list):
        if all(isinstance(v, str) for v in values):
            return values
        if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return values
    raise ValueError(
        f"filter on {key!r}: in, nin and ne take strings or integers (a list of one "
        f"kind for in/nin), got {values!r}; match a boolean with eq, or OR several"
    )


def _range(key: str, bounds: dict[str, Any]) -> Any:
    from qdrant_edge import FieldCondition, RangeDateTime, RangeFloat

    if all(isinstance(v, str) and _ISO_DATETIME.match(v) for v in bounds.values()):
        return FieldCondition(key=key, range=RangeDateTime(**bounds))
    try:
        numbers = {op: float(v) for op, v in bounds.items()}
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"range filter on {key!r} needs numbers or ISO 8601 dates, got {bounds!r}"
        ) from exc
    return FieldCondition(key=key, range=RangeFloat(**numbers))
