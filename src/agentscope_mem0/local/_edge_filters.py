"""mem0's filter dictionaries as Qdrant Edge filters.

mem0 2.2 passes one dict per call: the scope (``user_id``, ``agent_id``,
``run_id``, ``actor_id``) as plain values, and the user's metadata filters,
which may use operators (``eq``, ``ne``, ``gt``, ``gte``, ``lt``, ``lte``,
``in``, ``nin``, ``contains``, ``icontains``), a list for "any of", ``"*"``
for "any value", and the logical keys ``AND`` / ``OR`` / ``NOT`` (also
spelled ``$and`` / ``$or`` / ``$not``, mem0 renames some and keeps both).
The meaning follows mem0's own Qdrant store, so a memory found there is found
here. ``contains`` is a substring match; ``icontains`` matches the text as
given, lower-cased, upper-cased, capitalised or title-cased (the engine has no
case-folding match; mem0's own Qdrant store matches case-sensitively only).
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
    from qdrant_edge import (
        FieldCondition,
        Filter,
        MatchAny,
        MatchExcept,
        MatchSubstring,
        MatchValue,
    )

    if not isinstance(value, dict):
        if isinstance(value, str) and value == "*":
            return None
        if isinstance(value, list):
            return FieldCondition(key=key, match=MatchAny(any=value))
        return FieldCondition(key=key, match=MatchValue(value=value))
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
    if "eq" in value:
        return FieldCondition(key=key, match=MatchValue(value=value["eq"]))
    if "ne" in value:
        return FieldCondition(key=key, match=MatchExcept([value["ne"]]))
    if "in" in value:
        return FieldCondition(key=key, match=MatchAny(any=list(value["in"])))
    if "nin" in value:
        return FieldCondition(key=key, match=MatchExcept(list(value["nin"])))
    if "contains" in value:
        return FieldCondition(key=key, match=MatchSubstring(substring=str(value["contains"])))
    text = str(value["icontains"])
    # No case-folding match in the engine: try the spellings a payload is likely to use.
    spellings = dict.fromkeys([text, text.lower(), text.upper(), text.capitalize(), text.title()])
    return Filter(
        should=[FieldCondition(key=key, match=MatchSubstring(substring=s)) for s in spellings]
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
