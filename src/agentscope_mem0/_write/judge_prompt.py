"""The time judgement's prompt and the schema of its answer.

The model gets the new memories and the existing candidates under short keys
(``N1``..., ``E1``...; mem0 does the same with integer ids so that a model
cannot invent a memory id) with the date each was said, and answers
``{"judgements": [{"new": "N1", "updates": ["E2"], "extends": []}]}``.
:func:`parse_verdicts` rejects the whole answer when it strays from that.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from .._recall.escape import escape_memory

__all__ = ["JUDGE_MARK", "JUDGE_SYSTEM_PROMPT", "Verdict", "judge_prompt", "parse_verdicts"]

JUDGE_MARK = "Memory Timeline Judge"
"""Words that open the judgement prompt (the shipped test model looks for them)."""

JUDGE_SYSTEM_PROMPT = f"""You are the {JUDGE_MARK}. A user's memory store just \
received NEW memories. For each new memory, decide which of the EXISTING memories \
(of the same user) it changes:

- "updates": the existing memory is no longer true because of the new one: the \
same attribute now has another value (moved to another city, changed jobs, \
switched to another product, now prefers something else, no longer does or owns \
something, a plan was cancelled or changed).
- "extends": the new memory adds detail to the existing one, which stays true \
(the name of the new company, the date of a trip already known).

Anything else (related but both true, a different attribute, unsure) is neither: \
leave it out. Never list an existing memory under both. Each memory shows when it \
was said.

Answer with JSON only, in exactly this shape, one entry per new memory:
{{"judgements": [{{"new": "N1", "updates": ["E2"], "extends": []}}]}}"""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one new memory changes."""

    new: str
    """The new memory's key (``N1``...)."""
    updates: tuple[str, ...] = ()
    """Keys of existing memories no longer true."""
    extends: tuple[str, ...] = ()
    """Keys of existing memories it adds detail to."""


def _said(value: datetime | None) -> str:
    return f"{value:%Y-%m-%d}" if value is not None else "unknown"


def judge_prompt(
    new: Sequence[tuple[str, str, datetime | None]],
    existing: Sequence[tuple[str, str, datetime | None]],
) -> str:
    """The user message of the judgement: ``(key, text, said)`` of each memory."""
    # Memory text is data to the judge as much as to the agent: escaped the same way.
    payload = {
        "new_memories": [{"key": k, "text": escape_memory(t), "said": _said(s)} for k, t, s in new],
        "existing_memories": [
            {"key": k, "text": escape_memory(t), "said": _said(s)} for k, t, s in existing
        ],
    }
    return (
        "Judge these memories.\n\n"
        + json.dumps(payload, ensure_ascii=False, indent=1)
        + '\n\nAnswer with {"judgements": [...]} only.'
    )


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$")


def parse_verdicts(
    answer: str, new_keys: Sequence[str], existing_keys: Sequence[str]
) -> list[Verdict] | None:
    """The verdicts in ``answer``, or ``None`` when it does not follow the schema.

    Unknown keys, a key listed under both relations, or a shape other than
    ``{"judgements": [{"new", "updates", "extends"}]}`` reject the whole answer.
    """
    text = _FENCE.sub("", answer.strip())
    try:
        data = json.loads(text)
    except ValueError:
        match = re.search(r"\{.*\}", text, re.S)
        if match is None:
            return None
        try:
            data = json.loads(match.group(0))
        except ValueError:
            return None
    items = data.get("judgements") if isinstance(data, dict) else None
    if not isinstance(items, list):
        return None
    known_new, known_old = set(new_keys), set(existing_keys)
    verdicts: list[Verdict] = []
    seen: set[str] = set()
    for item in items:
        if not isinstance(item, dict) or item.get("new") not in known_new:
            return None
        relations: list[tuple[str, ...]] = []
        for name in ("updates", "extends"):
            value = item.get(name, [])
            if value is None:
                value = []
            if not isinstance(value, list) or not all(v in known_old for v in value):
                return None
            relations.append(tuple(dict.fromkeys(value)))
        updates, extends = relations
        if set(updates) & set(extends) or item["new"] in seen:
            return None
        seen.add(item["new"])
        verdicts.append(Verdict(new=item["new"], updates=updates, extends=extends))
    return verdicts
