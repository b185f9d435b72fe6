"""One pair of memories, a new one and an older one: how do they relate?

:meth:`PairJudge.relate` answers with a :class:`Relation`, asking the model
only reading questions (:mod:`.judge_prompt`) about one memory at a time:

1. Whose fact? Memories about different people never relate (:func:`same_holder`).
2. The new memory's question and answer ("Where does the user live?" /
   "Beijing"); the older memory read for that question. "not said": the
   two are unrelated. The same answer: the same fact; the same and more: the
   new one adds detail. Another answer: maybe a change.
3. A change is vetoed when the new memory tells of the past, adds one more
   item or tells of a while away (:mod:`~.._text.fact_words`), or when both
   tell of a relation that holds for several values at once and the new one
   says nothing of now or of an end ("用户去过日本" / "用户去过泰国":
   :func:`~.._text.fact_words.holds_several`). When the new
   memory's answer names only what it says has ended ("Tennis" read from
   "quit watching tennis on TV", "电动车" from "把电动车卖给了同事":
   :func:`~.._text.fact_words.answers_with_what_it_ends`), the readings tell
   neither a change nor a repeat: the older memory naming that thing is
   step 6's to ask.
4. A change is confirmed the other way round: the older memory's question
   read from the new memory must get another answer than the older one's.
   When the new memory does not answer it, there is no change. When the
   model put the same question to both memories (asked of each on its own;
   :func:`~.._text.fact_words.same_question`), their two answers already are
   that reading: another answer is a change without asking again, when the
   new memory's answer is its own words ("English" from "User stopped
   learning German" is not: :func:`~.._text.fact_words.names_its_answer`).
   When the older memory's question only asks yes or no ("用户在北京工作吗？" /
   "是"), or both answers of the first reading are their own memory's words
   ("看电视" / "看书"), and the new memory does not answer the older's
   question, the question of step 6 is asked in its place: only its "no" is a
   change.
5. When the older memory does not answer the new one's question at all, the
   other way round decides, with a short answer that is no denial (an event
   such as "moved to Valencia" answers the older state's "Where does the user
   live?" with "Valencia"), and the question of step 6 must be answered "no"
   as well ("User's arm has healed" answers "User has asthma"'s "What is the
   user's condition?" with "Healed").
6. When the readings find no change but the new memory's words end a thing
   the older one names, for good (:func:`~.._text.fact_words.ends_what_older_names`:
   "cancelled the trip to Japan" and "is planning a trip to Japan next summer"),
   the model is asked one more reading: is the older memory still true by the
   new one (:data:`~.judge_prompt.STILL_TRUE_PROMPT`)? Only its "no" is a change.
   So it is when the new memory says what the older says but for one short
   span, another in each (:func:`~.._text.fact_words.swaps_one_value`:
   "用户每天骑自行车上班" and "用户现在每天坐公交车上班"), where a small model
   asks and answers a yes-or-no question of each memory, which the other
   cannot answer.
7. When the readings do find a change but the new memory ends things the older
   one does not name (:func:`~.._text.fact_words.ends_something_else`: "stopped
   studying in the library" beside "is studying medicine"), the same question
   must be answered "no" too: the readings of such a pair often take the
   other half of the new memory ("now studies at home") for the older one's
   new value.

Only the model's readings decide a change; the words only veto one (another
person, the past, one more item, an end for a while, the ended thing as the
new value) or ask one more question. A missed change leaves two dated
memories in the note, newest first, where the reader can still tell; a wrong
one hides a true memory from every later reply. So when the readings find no
change, there is none, whatever the words say: "User quit smoking" ends "User
smokes ten a day", and also names what "User loves smoked salmon" names; the
model's reading tells the two apart.

A memory's question is asked once and kept (:attr:`Fact.question`; the
judge stores it in the memory's metadata), so an older memory costs a model
call only the first time it is a candidate. The same readings find repeats
(:attr:`Relation.SAME`), which the judge merges unless the words keep the
two apart (:func:`~.._text.same_fact.kept_apart`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from .._text.fact_words import (
    Agreement,
    answers_with_what_it_ends,
    compare_answers,
    denies,
    ends_something_else,
    ends_what_older_names,
    for_a_while,
    holds_several,
    is_additive,
    is_short_answer,
    names_its_answer,
    same_holder,
    same_question,
    swaps_one_value,
    tells_of_past,
    year_told,
)
from .._text.lexicon import lexicon_for
from .judge_prompt import (
    READ_PROMPT,
    STILL_TRUE_PROMPT,
    FactQuestion,
    asks_yes_or_no,
    is_not_said,
    parse_question,
    parse_reading,
    question_prompt,
    question_request,
    read_request,
    says_no,
    still_true_request,
)

__all__ = [
    "FACT_ANSWER",
    "FACT_QUESTION",
    "Ask",
    "Fact",
    "PairJudge",
    "Relation",
    "Verdict",
    "question_of_metadata",
]

logger = logging.getLogger(__name__)

FACT_QUESTION = "fact_question"
"""Metadata field keeping the question a memory answers."""
FACT_ANSWER = "fact_answer"
"""Metadata field keeping the memory's answer to it."""

_YEARS_AGO = 2
"""A year named this many years or more before a memory was said tells of the past."""

Ask = Callable[[str, str], Awaitable[str]]
"""``ask(system_prompt, user_message) -> answer``: one model call."""


class Relation(StrEnum):
    """How a new memory relates to an older one."""

    CHANGES = "changes"
    """The new memory makes the older one no longer true."""
    SAME = "same"
    """Both say the same thing."""
    EXTENDS = "extends"
    """The new memory adds detail to the older one, which stays true."""
    UNRELATED = "unrelated"
    """Both stand: another thing, another person, the past, one more item, or unsure."""


@dataclass
class Fact:
    """One memory as the judgement sees it."""

    id: str
    text: str
    said: datetime | None = None
    """When it was said (for a new memory: its write's said time)."""
    event_date: str | None = None
    """When its event happened, when the text gave it."""
    question: FactQuestion | None = None
    """Its question and answer, once asked (or read from its metadata)."""
    question_asked: bool = False
    """Whether this judgement asked the model for :attr:`question` (to store it)."""
    supersedes: list[str] = field(default_factory=list)
    """Ids of the memories it already superseded."""
    duplicates: list[str] = field(default_factory=list)
    """Ids of the repeats already merged into it."""
    agent_id: str | None = None
    """The agent it is filed under (``None``: the user's, of no agent)."""


def question_of_metadata(metadata: Mapping[str, Any] | None) -> FactQuestion | None:
    """The question and answer kept in a memory's metadata, if any."""
    meta = metadata or {}
    question, answer = meta.get(FACT_QUESTION), meta.get(FACT_ANSWER)
    if isinstance(question, str) and isinstance(answer, str) and question and answer:
        return FactQuestion(question, answer)
    return None


class PairJudge:
    """Relates memories pair by pair with reading questions to a model.

    Args:
        ask: One model call; it can raise (the caller's timeout, say), which
            propagates out of :meth:`relate`.
    """

    def __init__(self, ask: Ask) -> None:
        self._ask = ask
        self._still_true: dict[tuple[str, str], str] = {}
        """The model's "still true?" answers by (newer, older) text: asked once."""

    async def question_of(self, fact: Fact) -> FactQuestion | None:
        """``fact``'s question and answer, asked once."""
        if fact.question is None and not fact.question_asked:
            fact.question_asked = True
            answer = await self._ask(question_prompt(fact.text), question_request(fact.text))
            fact.question = parse_question(answer)
            if fact.question is None:
                logger.debug("no question read from the judge's answer %.200r", answer)
        return fact.question

    async def read(self, fact: Fact, question: str) -> str | None:
        """``fact``'s answer to ``question``; ``None`` when it does not say."""
        reading = parse_reading(await self._ask(READ_PROMPT, read_request(fact.text, question)))
        return None if is_not_said(reading) else reading

    async def relate(self, new: Fact, old: Fact) -> Relation:
        """How ``new`` relates to ``old`` (see the module's steps)."""
        return (await self.verdict(new, old)).relation

    async def verdict(self, new: Fact, old: Fact) -> Verdict:
        """How ``new`` relates to ``old``, and the readings that say so."""
        if not same_holder(new.text, old.text):
            return _UNRELATED
        verdict = await self._read_relation(new, old)
        if verdict.relation is Relation.CHANGES and holds_several(new.text, old.text):
            return _UNRELATED  # one more place been, pet kept, language spoken
        if verdict.relation is Relation.CHANGES and ends_something_else(new.text, old.text):
            return await self._ended(
                new, old, f"{verdict.reason}; confirmed, as the newer ends something else"
            )
        if verdict.relation is not Relation.UNRELATED or self._vetoed(new):
            return verdict
        if ends_what_older_names(new.text, old.text):
            return await self._ended(
                new, old, "model, asked as the newer's words end what the older names"
            )
        if swaps_one_value(new.text, old.text):
            return await self._ended(
                new, old, "model, asked as the newer puts another value in the older's place"
            )
        return verdict

    async def _ended(self, new: Fact, old: Fact, why: str) -> Verdict:
        """Steps 6 and 7: whether the model reads ``new`` as ending ``old``."""
        key = (new.text, old.text)
        if key not in self._still_true:
            request = still_true_request(new.text, old.text)
            self._still_true[key] = await self._ask(STILL_TRUE_PROMPT, request)
        answer = self._still_true[key]
        if not says_no(answer):
            return _UNRELATED
        return Verdict(
            Relation.CHANGES,
            f'{why}: "{old.text}" still true? "{parse_reading(answer)}"',
        )

    async def _read_relation(self, new: Fact, old: Fact) -> Verdict:
        """Steps 2-5: how the model's readings relate ``new`` to ``old``."""
        asked = await self.question_of(new)
        if asked is None:
            return _UNRELATED
        reading = await self.read(old, asked.question)
        if reading is None:
            return await self._changed_the_other_way(new, old)
        if answers_with_what_it_ends(new.text, asked.answer):
            # "What did the user sell?" / "电动车", read "电动车" from "has an e-bike":
            # the older names what the newer ends, which is no repeat (step 6 asks).
            return _UNRELATED
        agreement = compare_answers(reading, asked.answer)
        first = _read(asked.question, reading, asked.answer)
        if agreement is Agreement.SAME:
            return Verdict(Relation.SAME, f"model: {first}")
        if agreement is Agreement.MORE:
            return Verdict(Relation.EXTENDS, f"model: {first}")
        if self._vetoed(new):
            return _UNRELATED
        asked_old = await self.question_of(old)
        if asked_old is None:
            return _UNRELATED
        if (
            same_question(asked.question, asked_old.question)
            and compare_answers(asked_old.answer, asked.answer) is Agreement.DIFFERENT
            and names_its_answer(new.text, asked.answer)
        ):
            # Asked apart, the model put the same question to both memories and read
            # two answers: the reading the other way round would ask it again.
            return Verdict(Relation.CHANGES, f"model, one question of both: {first}")
        # Both ways round, or no change: a new memory that does not answer the older
        # one's question can be about another thing that shares a word with it.
        reading_new = await self.read(new, asked_old.question)
        if reading_new is None and asks_yes_or_no(asked_old):
            # The older's question only asks whether the older holds: "is it still
            # true?" asks the same of the new memory, where a bare question did not.
            return await self._ended(new, old, f"model: {first}; the older's is yes-or-no")
        if reading_new is None and _two_values(old, reading, new, asked.answer):
            # Two values, each in its own memory's words ("看电视" / "看书"), but the
            # older's own question went astray ("什么时候看电视？"): "is it still
            # true?" is the other way round.
            return await self._ended(new, old, f"model: {first}; the older's not read")
        if reading_new is None or answers_with_what_it_ends(new.text, reading_new):
            return _UNRELATED
        if compare_answers(asked_old.answer, reading_new) is not Agreement.DIFFERENT:
            return _UNRELATED
        second = _read(asked_old.question, asked_old.answer, reading_new)
        return Verdict(Relation.CHANGES, f"model, both ways: {first}; {second}")

    @staticmethod
    def _vetoed(new: Fact) -> bool:
        """A new memory about the past (in words or by a year long gone), about
        one more item or about a while away changes nothing."""
        return (
            tells_of_past(new.text)
            or is_additive(new.text)
            or for_a_while(new.text)
            or _years_ago(new)
        )

    async def _changed_the_other_way(self, new: Fact, old: Fact) -> Verdict:
        """When the older memory does not answer the new one's question.

        A new memory often tells of an event ("moved to Valencia") whose
        question the older state ("lives in Madrid") does not answer, while
        it does answer the older memory's question ("Where does the user
        live?") with another answer: that is a change too.
        """
        if self._vetoed(new):
            return _UNRELATED
        asked, reading = await self._other_way(new, old)
        # Only a short answer that names a new value: a sentence retelling the new
        # memory ("The user quit smoking last spring." for "What does the user do?")
        # or a denial answers another question than the older memory's.
        if (
            asked is None
            or reading is None
            or not is_short_answer(reading)
            or denies(reading)
            or answers_with_what_it_ends(new.text, reading)
        ):
            return _UNRELATED
        if compare_answers(asked.answer, reading) is not Agreement.DIFFERENT:
            return _UNRELATED
        # One reading, one way round: the model must also read the older memory as
        # ended ("User's arm has healed" answers "What is the user's condition?"
        # of "User has asthma" with "Healed").
        why = f"model, the older's question: {_read(asked.question, asked.answer, reading)}"
        return await self._ended(new, old, f"{why}; confirmed")

    async def _other_way(self, new: Fact, old: Fact) -> tuple[FactQuestion | None, str | None]:
        """The older memory's question and answer, and the new memory's reading of
        it; ``(None, None)`` when the older memory has no question."""
        asked = await self.question_of(old)
        if asked is None:
            return None, None
        return asked, await self.read(new, asked.question)


@dataclass(frozen=True)
class Verdict:
    """How a new memory relates to an older one, and why."""

    relation: Relation
    reason: str = ""
    """The readings that decided it ("model, both ways: ..."), kept with the
    memory it hides (``superseded_reason``, ``duplicate_reason``)."""


_UNRELATED = Verdict(Relation.UNRELATED)


def _read(question: str, older: str, newer: str) -> str:
    """One reading as a reason: the question, the older memory's answer, the newer's."""
    return f'"{question}" older "{older}", newer "{newer}"'


def _two_values(old: Fact, reading: str, new: Fact, answer: str) -> bool:
    """Whether the older memory's ``reading`` and the new memory's ``answer`` are
    each a short value in its own memory's words: no sentence retelling it ("The
    user played guitar." for "What did the user do?": the question asks about
    anything), no denial ("不在"), no answer the model made up ("在家中" read
    from "用户对青霉素过敏"). In a language no lexicon reads the words can
    check none of this: ``False``."""
    return all(
        lexicon_for(fact.text) is not None
        and is_short_answer(value)
        and not denies(value)
        and names_its_answer(fact.text, value)
        for fact, value in ((old, reading), (new, answer))
    )


def _years_ago(new: Fact) -> bool:
    """Whether ``new`` names a year at least :data:`_YEARS_AGO` before it was said:
    "User interned at IBM in 2015", said in 2024, tells of the past as "years ago"
    does. A relative date ("last month") or a recent year is no such sign: "User
    moved to Beijing last month" still ends "User lives in Hangzhou", told the
    same day."""
    year = year_told(new.text)
    said = new.said or datetime.now(UTC)
    return year is not None and year <= said.year - _YEARS_AGO
