"""The profile's distillation: the prompt, reading the answer, and checking it.

The model sees the user's current memories only (superseded ones never reach
it) and is asked for one short line per fact, in the facts' language, with
nothing they do not say. What comes back is a proposal: each line must be
grounded in the current memories by its words (:func:`grounded_line`, the
same content words and names the extraction check reads), or it is dropped;
the lines kept are cut to the profile's token budget.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .._text.grounding import content_words, says, specifics
from .._text.tokens import estimate_tokens

__all__ = [
    "DEFAULT_PROFILE_LINES",
    "DEFAULT_PROFILE_TOKENS",
    "PROFILE_KEEP_SHARE",
    "PROFILE_SYSTEM",
    "Distilled",
    "grounded_line",
    "profile_prompt",
    "read_profile",
]

DEFAULT_PROFILE_TOKENS = 200
"""The most tokens a profile holds (an estimate; lines past it are left out)."""
DEFAULT_PROFILE_LINES = 12
"""The most lines the model is asked for."""
PROFILE_KEEP_SHARE = 0.5
"""A line whose content words are at least this share in the current memories
(and whose names and numbers all are) is kept: half, since a profile line
rewords its fact ("Lives in Madrid" of "User moved to Madrid"); its names and
numbers must all be there."""

PROFILE_SYSTEM = """You write a short profile of a user from the facts stored about them.

Rules:
- Use only the facts listed. Add nothing they do not say: no guesses, no advice, no summary words.
- Keep the facts that say who the user is: where they live, work, family, health, diet, \
pets, habits, likes, plans.
- One short line per fact, starting with "- ". Keep the facts' own words and names.
- Write each line in the language of its fact (a Chinese fact stays Chinese).
- At most {max_lines} lines. No title, no introduction, nothing after the list."""
"""The distillation's instructions (tuned on the dev half of
benchmarks/data/profile_users.jsonl)."""

# Words every profile line may use without a memory saying them.
_FRAME_WORDS = frozenset({"user", "用", "户"})
_BULLET = re.compile(r"^\s*(?:[-*•·]|\d+[.)、]|[（(]?\d+[)）])\s*")
_DATE_PREFIX = re.compile(r"^\[?\(?\d{4}-\d{2}-\d{2}\]?\)?[:：]?\s*")
# A date the model adds to a line (from a fact's own text or of its own) is no fact.
_DATE_SUFFIX = re.compile(r"\s*[(\[（]\d{4}-\d{2}-\d{2}[)\]）]\s*[.。]?\s*$")


def profile_prompt(memories: Sequence[str], *, max_lines: int) -> str:
    """The user message: the current memories, newest first.

    Their dates stay out: a small model copies them into every line (measured
    on the dev half), and the profile is dated as a whole.

    Args:
        memories: The memories' texts, newest first.
        max_lines: The most lines the profile may have.
    """
    lines = [f"- {text}" for text in memories]
    return (
        "Facts about the user, newest first:\n"
        + "\n".join(lines)
        + (f"\n\nWrite the profile: at most {max_lines} lines.")
    )


def _lines_of(answer: str) -> list[str]:
    """The answer's fact lines, without bullets, dates and headings."""
    raw = [line.strip() for line in answer.strip().strip("`").splitlines()]
    bulleted = [line for line in raw if _BULLET.match(line)]
    out = []
    for line in bulleted or raw:
        text = _DATE_PREFIX.sub("", _BULLET.sub("", line)).strip().strip("*").strip()
        text = _DATE_SUFFIX.sub("", text)
        if text and not text.endswith((":", "：")):
            out.append(text)
    return out


def grounded_line(line: str, memories: str) -> bool:
    """Whether the current ``memories`` (joined) say what ``line`` says.

    Every name and number of the line must be in them, and most of its
    content words (:data:`PROFILE_KEEP_SHARE`).
    """
    words = content_words(line) - _FRAME_WORDS
    if not words:
        return False
    # A profile line opens with its verb ("Lives in ..."): not a name.
    opened = line[:1].lower() + line[1:]
    if any(not says(memories, name) for name in specifics(opened)):
        return False
    return len(words & content_words(memories)) / len(words) >= PROFILE_KEEP_SHARE


@dataclass
class Distilled:
    """What was read of one answer."""

    lines: list[str] = field(default_factory=list)
    """The lines kept, in the model's order, within the budget."""
    dropped: list[str] = field(default_factory=list)
    """Lines the memories do not ground (invented, or from a superseded fact)."""
    cut: int = 0
    """Grounded lines left out for the token budget."""

    @property
    def text(self) -> str:
        """The profile's text, one ``- `` line per fact."""
        return "\n".join(f"- {line}" for line in self.lines)


def read_profile(answer: str, memories: Sequence[str], *, max_tokens: int) -> Distilled:
    """The profile in ``answer``: lines grounded in ``memories``, within ``max_tokens``.

    Args:
        answer: The model's answer.
        memories: The current memories' texts it was given.
        max_tokens: The profile's budget (estimated tokens).
    """
    joined = "\n".join(memories)
    out = Distilled()
    used = 0
    seen: set[str] = set()
    for line in _lines_of(answer):
        if line.casefold() in seen:
            continue
        seen.add(line.casefold())
        if not grounded_line(line, joined):
            out.dropped.append(line)
            continue
        cost = estimate_tokens(line) + 3  # "- " and the newline
        if used + cost > max_tokens:
            out.cut += 1
            continue
        out.lines.append(line)
        used += cost
    return out
