"""Which extraction prompt mem0's ``add`` sends, and the answer it gets back.

The chat-model adapter hands every prompt to :func:`prepare_extraction` and
every answer to :func:`read_extraction_answer`; both change only mem0's
extraction calls inside one of this package's ``add`` calls (the backend
sets its :class:`~.call_context.Mem0Call`).

While a write's said time is known, mem0's "Observation Date" becomes the
said date and the prompt asks for each memory's ``event_date``; the dates
the answer gives are kept per memory text for the backend to store.

mem0 2.2's extraction prompt (``ADDITIVE_EXTRACTION_PROMPT``) is 7,924
tokens before the conversation: past the 2k/4k context of most local
servers, minutes per write on two CPU cores, ~8k paid input tokens per write.
With ``extraction="compact"`` it is replaced, for the calls of one ``add``,
by :data:`COMPACT_SYSTEM_PROMPT` and a user message of the same sections
(existing memories, the new messages, the observation date) cut so that
prompt and answer fit in :data:`COMPACT_CONTEXT_TOKENS`. The answer keeps
mem0's format, ``{"memory": [{"id", "text", "attributed_to"}]}``, plus this
package's ``event_date``.

:func:`repair_extraction_answer` takes the JSON out of a small model's
wrapping (a code fence, a sentence around it) and turns a bare list of
strings into mem0's items, where that is unambiguous.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any

from .._exceptions import ConfigurationError
from .._memories.lifecycle import EVENT_DATE, is_event_date
from .._text.grounding import (
    DROP_REASONS,
    grounding_question,
    read_answer,
    read_grounding,
    third_person,
    writes_cjk,
)
from .._text.model_json import find_json_object
from .._text.tokens import estimate_tokens, prefix_within
from .call_context import ExtractionCheck, ExtractionStyle, WriteTime, current

logger = logging.getLogger(__name__)

__all__ = [
    "COMPACT_CONTEXT_TOKENS",
    "COMPACT_SYSTEM_PROMPT",
    "EVENT_DATE_INSTRUCTIONS",
    "EXTRACTION_STYLES",
    "KEEP_INSTRUCTIONS",
    "ExtractionStyle",
    "annotate_results",
    "check_extraction",
    "compact_extraction",
    "keep_grounded",
    "language_instruction",
    "prepare_extraction",
    "read_extraction_answer",
    "repair_extraction_answer",
]

EXTRACTION_STYLES: tuple[ExtractionStyle, ...] = ("mem0", "compact")

COMPACT_CONTEXT_TOKENS = 4096
"""The context the compact prompt, the conversation and the answer fit in."""

_ANSWER_TOKENS = 700
"""Kept free for the answer: about fifteen memories with dates."""

_EXISTING_SHOWN = 5
_EARLIER_SHOWN = 2
_EARLIER_TOKENS = 80

COMPACT_SYSTEM_PROMPT = """You are a Memory Extractor. From the New Messages of a \
conversation between a user and an assistant, write down the facts worth remembering \
for later conversations with this user.

Keep only what the user states about themselves and the people in their life: name, \
home, work, family, pets, health and allergies, likes and dislikes, habits, plans, \
events, possessions, opinions; and what the user asks you to remember.
Never keep: the assistant's answers, advice, recommendations or claims about the user; \
general knowledge; the user's questions and requests (asking is not a fact); greetings, \
thanks, small talk; code; and facts already in Existing Memories.

Rules:
- One fact per item: a short sentence that names who it is about ("User ...", \
"User's sister ..."), in the language the user writes in (Chinese -> Chinese).
- Several facts in one message are several items.
- Copy names, numbers and places exactly. Never add a fact the messages do not state.
- "event_date": only when the messages say when the event happened or will happen \
("last month", "in 2019", "next Friday"): resolve it against the Observation Date as \
YYYY-MM-DD, or YYYY-MM / YYYY when only the month or year is known.
- Nothing worth keeping: {"memory": []}

Answer with JSON only, in this shape:
{"memory": [{"id": "0", "text": "<fact>", "attributed_to": "user"}, \
{"id": "1", "text": "<fact>", "attributed_to": "user", "event_date": "<date>"}]}"""
"""The compact extraction's system prompt (about 380 tokens)."""


def check_extraction(value: Any) -> ExtractionStyle:
    """``value`` if it names an extraction style, else a clear error.

    Raises:
        ConfigurationError: Not ``"mem0"`` or ``"compact"``.
    """
    if value not in EXTRACTION_STYLES:
        raise ConfigurationError(
            f"unknown extraction {value!r}; use 'mem0' (mem0's own prompt, the default) "
            "or 'compact' (fits a 4k context: small local models, fewer paid tokens)"
        )
    return value


# -- the said time ------------------------------------------------------------------

_OBSERVATION = re.compile(r"(## Observation Date\n)([^\n]*)")
_OUTPUT = "# Output:"

EVENT_DATE_INSTRUCTIONS = (
    "## Event Dates\n"
    'Give each memory an "event_date" field when the messages say when the event it '
    'describes happened or will happen ("last month", "in 2019", "next Friday", '
    '"on May 3"): resolve it against the Observation Date and write it as YYYY-MM-DD, '
    "or YYYY-MM / YYYY when only the month or year is known. Leave the field out when "
    "the messages give no date for the event; the Observation Date itself is not an "
    "event date."
)
"""Appended to mem0's extraction prompt while a write's said time is known."""


def prepare_extraction(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """mem0's prompt as this call's extraction sends it.

    With a said time, the said date is the observation date and event dates
    are asked for; with ``extraction="compact"``, the compact prompt
    (:func:`compact_extraction`). Other prompts, and calls outside an ``add``
    of this package, pass unchanged.
    """
    call = current()
    return compact_extraction(_with_rules(_with_said_date(messages, call.said), call.check))


def _with_said_date(messages: list[dict[str, Any]], said: WriteTime | None) -> list[dict[str, Any]]:
    if said is None or not messages:
        return messages
    last = messages[-1]
    content = last.get("content")
    if last.get("role") != "user" or not isinstance(content, str):
        return messages
    if "## New Messages" not in content or _OBSERVATION.search(content) is None:
        return messages
    day = said.said_at.date().isoformat()
    content = _OBSERVATION.sub(lambda m: m.group(1) + day, content, count=1)
    if _OUTPUT in content:
        head, _, tail = content.rpartition(_OUTPUT)
        content = f"{head}{EVENT_DATE_INSTRUCTIONS}\n\n{_OUTPUT}{tail}"
    else:
        content = f"{content}\n\n{EVENT_DATE_INSTRUCTIONS}"
    return [*messages[:-1], {**last, "content": content}]


KEEP_INSTRUCTIONS = (
    "## What This Store Keeps\n"
    "Keep only facts the user states about themselves and the people in their life, "
    "and what the user asks to be remembered. Do not keep the assistant's answers, "
    "advice, recommendations or claims about the user, general knowledge, or the "
    "user's questions and requests: asking is not a fact."
)
"""Added to mem0's own extraction prompt when the extraction is checked."""


def language_instruction(user_text: str) -> str:
    """The line telling the extraction which language to write memories in."""
    if writes_cjk(user_text):
        return (
            "The user writes in Chinese (or Japanese, Korean): write every memory in the "
            "user's language and script, never translated into English."
        )
    return "Write every memory in the language the user writes in."


def _with_rules(
    messages: list[dict[str, Any]], check: ExtractionCheck | None
) -> list[dict[str, Any]]:
    """mem0's own prompt with what this store keeps and the user's language (the
    compact prompt says both itself; the user's own rules reach mem0's prompt as
    its custom instructions)."""
    if check is None or check.grounding is None or not messages:
        return messages
    last = messages[-1]
    content = last.get("content")
    if last.get("role") != "user" or not isinstance(content, str):
        return messages
    if "## New Messages" not in content or _OUTPUT not in content:
        return messages
    rules = f"{KEEP_INSTRUCTIONS}\n{language_instruction(check.grounding.user)}"
    head, _, tail = content.rpartition(_OUTPUT)
    return [*messages[:-1], {**last, "content": f"{head}{rules}\n\n{_OUTPUT}{tail}"}]


def annotate_results(results: list[Any], said: WriteTime) -> None:
    """Add each memory's event date, found by the extraction, to mem0's results."""
    for item in results:
        if not isinstance(item, dict):
            continue
        when = said.event_dates.get(str(item.get("memory", "")))
        if when:
            item.setdefault(EVENT_DATE, when)


# -- the compact prompt -------------------------------------------------------------

_SECTION = re.compile(r"^## ([^\n]+)\n", re.M)


def _sections(prompt: str) -> dict[str, str]:
    """mem0 2.2's user prompt by section name.

    New Messages may itself hold a line starting with ``## ``, so it runs up to
    the Observation Date section, which mem0 always puts right after it.
    """
    out: dict[str, str] = {}
    start = prompt.find("## New Messages\n")
    end = prompt.rfind("\n\n## Observation Date\n")
    if start < 0 or end < start:
        return out
    out["New Messages"] = prompt[start + len("## New Messages\n") : end]
    for part in (prompt[:start], prompt[end + 2 :]):
        marks = list(_SECTION.finditer(part))
        for i, mark in enumerate(marks):
            stop = marks[i + 1].start() if i + 1 < len(marks) else len(part)
            out[mark.group(1).strip()] = part[mark.end() : stop].strip()
    return out


def _existing(section: str) -> list[str]:
    try:
        items = json.loads(section or "[]")
    except ValueError:
        return []
    texts = [str(item.get("text", "")) for item in items if isinstance(item, dict)]
    return [" ".join(t.split()) for t in texts if t.strip()][:_EXISTING_SHOWN]


_TURN = re.compile(r"^(user|assistant|system): ", re.M)


def _turns(conversation: str) -> list[tuple[str, str]]:
    """``role: text`` lines (a text may span lines) as ``(role, text)`` pairs."""
    marks = list(_TURN.finditer(conversation))
    return [
        (
            mark.group(1),
            conversation[
                mark.end() : marks[i + 1].start() if i + 1 < len(marks) else len(conversation)
            ].strip(),
        )
        for i, mark in enumerate(marks)
    ]


def _shorten(text: str, tokens: int) -> str:
    """``text`` within ``tokens``: its start and its end, the middle left out."""
    if estimate_tokens(text) <= tokens:
        return text
    marker = " [...] "
    head = prefix_within(text, max(tokens * 2 // 3, 1))
    tail_budget = max(tokens - estimate_tokens(head) - 3, 0)
    reversed_tail = prefix_within(text[len(head) :][::-1], tail_budget)
    return head.rstrip() + marker + reversed_tail[::-1].lstrip()


def _fit(turns: list[tuple[str, str]], budget: int) -> list[tuple[str, str]]:
    """``turns`` within ``budget`` tokens: the longest turns are shortened first,
    the assistant's before the user's, each to no less than an equal share."""
    sizes = [estimate_tokens(text) + 2 for _, text in turns]
    if sum(sizes) <= budget or not turns:
        return turns
    out = list(turns)
    for roles in (("assistant",), ("assistant", "user", "system")):
        over = sum(sizes) - budget
        if over <= 0:
            break
        chosen = [i for i, (role, _) in enumerate(out) if role in roles]
        # Cut the chosen turns down to a common cap that removes ``over`` tokens.
        fixed = sum(size for i, size in enumerate(sizes) if i not in chosen)
        cap = max((budget - fixed) // max(len(chosen), 1), 16)
        for i in chosen:
            if sizes[i] > cap:
                out[i] = (out[i][0], _shorten(out[i][1], cap - 2))
                sizes[i] = estimate_tokens(out[i][1]) + 2
    return out


def compact_extraction(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """mem0's extraction messages as the compact prompt; others unchanged.

    Only calls of an ``add`` with ``extraction="compact"`` change, and only
    when the messages are mem0 2.2's extraction prompt (a system message and
    a user message with a ``## New Messages`` and an ``## Observation Date``
    section).
    """
    if current().extraction != "compact" or len(messages) != 2:
        return messages
    system, user = messages
    prompt = user.get("content")
    if system.get("role") != "system" or user.get("role") != "user" or not isinstance(prompt, str):
        return messages
    sections = _sections(prompt)
    if "New Messages" not in sections or "Observation Date" not in sections:
        return messages
    existing = _existing(sections.get("Existing Memories", ""))
    earlier = _turns(sections.get("Last k Messages", ""))[-_EARLIER_SHOWN:]
    parts = []
    if existing:
        parts.append("## Existing Memories\n" + "\n".join(f"- {t}" for t in existing))
    if earlier:
        lines = [f"{role}: {_shorten(text, _EARLIER_TOKENS)}" for role, text in earlier]
        parts.append("## Earlier Messages (context only, do not extract)\n" + "\n".join(lines))
    check = current().check
    custom = [sections.get("Custom Instructions", ""), check.guidance if check else ""]
    if any(custom):
        parts.append("## Custom Instructions\n" + "\n".join(filter(None, custom)))
    if check is not None and check.grounding is not None:
        parts.append("## Language\n" + language_instruction(check.grounding.user))
    date = f"## Observation Date\n{sections['Observation Date']}"
    used = estimate_tokens(COMPACT_SYSTEM_PROMPT) + estimate_tokens("\n\n".join([*parts, date]))
    budget = COMPACT_CONTEXT_TOKENS - _ANSWER_TOKENS - used - 16
    turns = _fit(_turns(sections["New Messages"]), budget)
    conversation = "\n".join(f"{role}: {text}" for role, text in turns)
    parts += [f"## New Messages\n{conversation}", date]
    return [
        {"role": "system", "content": COMPACT_SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]


# -- the answer ---------------------------------------------------------------------


def read_extraction_answer(
    answer: str | dict[str, Any],
    *,
    json_mode: bool,
    ask: Callable[[str], str] | None = None,
) -> str | dict[str, Any]:
    """mem0's answer as this package hands it back: a JSON-mode answer repaired
    (:func:`repair_extraction_answer`), the proposals the user's words do not
    ground dropped (:func:`keep_grounded`, ``ask`` putting a short question to
    the model where the words cannot tell), and the event dates it gives kept
    for the write under way."""
    if json_mode and isinstance(answer, str):
        answer = repair_extraction_answer(answer)
        check = current().check
        if check is not None and check.grounding is not None:
            answer = keep_grounded(answer, check, ask)
    said = current().said
    if said is None or not isinstance(answer, str) or '"event_date"' not in answer:
        return answer
    parsed = find_json_object(answer)
    items = parsed.get("memory") if parsed is not None else None
    for item in items if isinstance(items, list) else []:
        if not isinstance(item, dict):
            continue
        memory, when = item.get("text"), item.get("event_date")
        if isinstance(memory, str) and isinstance(when, str) and is_event_date(when):
            said.event_dates[memory] = when
    return answer


def keep_grounded(answer: str, check: ExtractionCheck, ask: Callable[[str], str] | None) -> str:
    """``answer`` without the proposed memories the exchange does not ground.

    Each proposal is read against the user's words (:func:`.._text.grounding.read_grounding`);
    one the words cannot decide, and with the user's ``ignore`` rules every one
    the words keep, is put to the model in one short question (``ask``; without
    it, the words' reading stands and an undecided one is kept). A failing
    question fails the write, which is retried. What was dropped, kept and
    asked is counted on ``check``. A kept proposal in the user's first person
    is told of "User" (:func:`.._text.grounding.third_person`). An answer that
    is not mem0's JSON is left as it is.
    """
    assert check.grounding is not None
    parsed = find_json_object(answer)
    items = parsed.get("memory") if parsed is not None else None
    if not isinstance(items, list):
        return answer
    kept = []
    for item in items:
        text = item.get("text") if isinstance(item, dict) else None
        if not isinstance(text, str) or not text.strip():
            kept.append(item)  # not a proposal: mem0's answer check reports it
            continue
        reading = read_grounding(text, check.grounding)
        # The words cannot tell, or cannot read the user's "never remember" rules.
        if ask is not None and (reading == "unsure" or (reading == "grounded" and check.ignore)):
            check.asked += 1
            question = grounding_question(text, check.grounding, check.guidance)
            if not read_answer(ask(question)):  # NO, or no clear answer: not stored
                reading = "ignored" if reading == "grounded" else "ungrounded"
            else:
                reading = "grounded"
        if reading in DROP_REASONS:
            check.dropped[reading] = check.dropped.get(reading, 0) + 1
            logger.debug("dropped a proposed memory (%s): %r", reading, text)
            continue
        check.kept += 1
        told = third_person(text)
        if told != text:
            item = {**item, "text": told}
            check.rewritten = True
        kept.append(item)
    if len(kept) == len(items) and not check.rewritten:
        return answer
    assert parsed is not None
    return json.dumps({**parsed, "memory": kept}, ensure_ascii=False)


def repair_extraction_answer(answer: str) -> str:
    """mem0's extraction JSON out of a model's wrapping, where that is unambiguous.

    An answer ``json.loads`` reads is returned as it is (its faults, if any,
    are :mod:`.add_check`'s to report). Otherwise the one JSON object holding
    a ``"memory"`` list is taken out of a code fence or the text around it,
    and bare strings in that list become ``{"id", "text", "attributed_to"}``
    items. Anything else comes back unchanged.
    """
    if not isinstance(answer, str):
        return answer
    try:
        parsed = json.loads(answer, strict=False)
        plain = True
    except ValueError:
        parsed, plain = find_json_object(answer), False
    if not isinstance(parsed, dict) or not isinstance(parsed.get("memory"), list):
        return answer
    items = parsed["memory"]
    if plain and not any(isinstance(item, str) for item in items):
        return answer
    fixed = [
        {"id": str(i), "text": item, "attributed_to": "user"} if isinstance(item, str) else item
        for i, item in enumerate(items)
    ]
    return json.dumps({**parsed, "memory": fixed}, ensure_ascii=False)
