"""What follows a stored write: the time judgement (or, without it, consolidation).

mem0 2.2's extraction only ever adds, so "User lives in Hangzhou" and, later,
"User moved to Beijing" would both be recalled as true, and a fact said
twice would be two memories. After each stored write, :class:`TimeJudge`
takes each new memory, looks up the few older memories of the user most
like it (one vector search; the same scope the reads search) and relates it
to each, one pair at a time (:mod:`.judge_pairs`): a change marks the older
memory superseded, a detail marks the new one as extending it, and a repeat
marks the new one a duplicate of the older (consolidation, see
:mod:`.consolidate`). The verdicts are metadata (:class:`ChangePlan`,
:mod:`.._memories.lifecycle`): nothing is deleted, superseded memories and
repeats are only left out of reads.

A repeat the words already show (:func:`~.._text.same_fact.first_repeat`)
costs no model call; the model's "same answer" merges only what the words do
not keep apart (another person, negation, another time, other numbers, another
verb, more detail: :func:`~.._text.same_fact.kept_apart`).

What keeps a small model from hiding true memories: it is only asked
reading questions about one memory at a time; a change must hold both ways
round; memories about another person, the past or one more item are never
changed; and one write supersedes at most ``max_superseded`` memories.

The judgement never holds up writes: the queue tells :class:`FollowUp`
(its :class:`~.queue.AfterStore`), which refreshes the profile cache and
queues the write in a :class:`Lanes` lane per searched scope, judged in
order in the background (a later change must see the earlier one). Each
model call has ``timeout`` seconds; a call that fails or is late ends the
model's part of that write's judgement (counted as skipped): the rest of its
memories are only compared by their words. Without a judge (``judge=False``,
hosted mem0, a client that extracts with another LLM) the same lanes run
:class:`~.consolidate.Consolidator` instead.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from agentscope.message import SystemMsg, UserMsg

from .._mem0.call_context import metered, no_reply_waits, record_call
from .._memories.lifecycle import (
    DUPLICATE_OF,
    DUPLICATES,
    EVENT_DATE,
    EXTENDS,
    SAID_AT,
    SUPERSEDED_BY,
    SUPERSEDES,
    VALID_FROM,
    VALID_UNTIL,
    event_date_of,
    ids_of,
    retired_since,
)
from .._observe.latency import LatencyRecorder
from .._observe.tracing import SpanHandle, model_span, span
from .._observe.usage import CallTokens, TokenMeter
from .._text.dates import parse_time
from .._text.same_fact import FactShape, fact_shape, first_repeat, kept_apart, user_names
from .consolidate import (
    DEFAULT_CONSOLIDATION_CANDIDATES,
    Consolidator,
    duplicate_marks,
    new_memories,
)
from .judge_pairs import (
    FACT_ANSWER,
    FACT_QUESTION,
    Fact,
    PairJudge,
    Relation,
    question_of_metadata,
)

if TYPE_CHECKING:
    from agentscope.model import ChatModelBase

    from .._mem0.backend import Mem0Backend
    from .._memories.hit import MemoryHit
    from .._scope import Scope

__all__ = [
    "DEFAULT_JUDGE_CANDIDATES",
    "DEFAULT_JUDGE_TIMEOUT",
    "DEFAULT_MAX_SUPERSEDED",
    "ChangePlan",
    "FollowUp",
    "Lanes",
    "TimeJudge",
    "build_time_judge",
    "judge_model_of",
]

logger = logging.getLogger(__name__)

DEFAULT_JUDGE_CANDIDATES = 3
"""Older memories related to each new memory (the most similar ones)."""

DEFAULT_JUDGE_TIMEOUT = 120.0
"""Seconds one model call of the judgement may take (as one extraction call)."""

DEFAULT_MAX_SUPERSEDED = 2
"""Older memories one stored write may supersede, however many facts it held."""

_MAX_NEW_JUDGED = 8
"""New memories of one write that are related to older ones; the rest are only dated."""

_JUDGE_BACKLOG = 32
"""Writes waiting for judgement per searched scope; beyond it new ones are only dated."""

_CONSOLIDATION_BACKLOG = 64
"""Writes waiting for consolidation per searched scope; beyond it new ones are not."""

_HIDING = (SUPERSEDED_BY, DUPLICATE_OF)
"""Changes that take a memory out of reads: stored after every other change."""


class Cache(Protocol):
    """A cache of what a scope's memories say (the profile cache)."""

    def invalidate(self, scope: Scope) -> None:
        """Forget what a write to ``scope`` may change."""


class FollowUp:
    """What follows each stored batch: the queue's :class:`~.queue.AfterStore`.

    The profile cache is refreshed at once; the time judgement (with a judge)
    or consolidation (without) runs in the background, in order per searched
    scope, and refreshes it again when it changed what reads show.

    Args:
        profiles: The profile cache.
        judge: The time judge; ``None`` consolidates without a model.
        consolidator: Consolidation, when no judge runs.
        search_by_agent: Writes are judged in the order of the scope the
            reads search (the writing agent's, or the whole user's).
    """

    def __init__(
        self,
        profiles: Cache,
        judge: TimeJudge | None,
        consolidator: Consolidator,
        *,
        search_by_agent: bool = True,
    ) -> None:
        self._profiles = profiles
        self._judge = judge
        self._consolidator = consolidator
        self._search_by_agent = search_by_agent
        self._lanes = Lanes(_JUDGE_BACKLOG if judge is not None else _CONSOLIDATION_BACKLOG)

    def stored(self, scope: Scope, results: list[dict[str, Any]], said_at: datetime) -> None:
        """Refresh ``scope``'s profiles and queue the batch's judgement (or
        consolidation); returns at once (see :class:`~.queue.AfterStore`)."""
        self._profiles.invalidate(scope)
        judge, consolidator = self._judge, self._consolidator
        if not results or (judge is None and not consolidator.enabled):
            return
        if judge is not None and not new_memories(results):
            return

        async def follow(overflow: bool) -> None:
            if judge is not None:
                changed = await judge.judge(scope, results, said_at, ask=not overflow)
            elif overflow:
                consolidator.skip()
                return
            else:
                kept = await consolidator.consolidate(scope, results, said_at)
                changed = len(kept) < len(results)
            if changed:  # what reads show changed, not only the kept questions
                self._profiles.invalidate(scope)

        if not self._lanes.submit(scope.searched(by_agent=self._search_by_agent), follow):
            logger.warning(
                "over %d writes of user %s wait for %s",
                self._lanes.backlog,
                scope.user_id,
                "the time judgement; this one is only dated"
                if judge is not None
                else "consolidation; repeats may stay current",
            )

    def stats(self) -> dict[str, Any]:
        """``consolidation_*`` and, with a judge, ``judge_*`` counters, writes
        waiting, and the background time per write."""
        waiting = self._lanes.waiting
        out = self._consolidator.stats()
        out["consolidation_waiting"] = 0 if self._judge is not None else waiting
        if self._judge is not None:
            out.update(self._judge.stats())
            out["judge_waiting"] = waiting
        return out

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until the writes queued so far are followed up; True when in time."""
        return await self._lanes.flush(timeout)

    def stop(self) -> int:
        """Drop the writes waiting and cancel the running ones (at close).

        The writes themselves are stored already; only their judgement (or
        consolidation) is lost.

        Returns:
            How many writes were left.
        """
        if self._judge is not None:
            self._judge.stopped = True
        left = self._lanes.stop()
        if left and self._judge is not None:
            logger.info("%d writes were left without a time judgement at close", left)
        return left


Job = Callable[[bool], Awaitable[None]]
"""``job(overflow)``: one piece of work; ``overflow`` when the backlog was full."""


@dataclass
class _Lane:
    waiting: deque[tuple[Job, bool]] = field(default_factory=deque)
    task: asyncio.Future[None] | None = None


class Lanes:
    """Background jobs run in order per key, which the caller never waits for.

    :meth:`submit` queues a job and returns, and one task per key runs that
    key's jobs one after another. A key whose backlog is full gets its jobs
    marked as overflow (the job decides what it still does). No reply waits
    for these jobs, so they run under :func:`~.._mem0.call_context.no_reply_waits`:
    their mem0 reads take the write lane and their embeddings wait for every
    reply's query.

    Args:
        backlog: Jobs waiting per key beyond which new ones are overflow.
    """

    def __init__(self, backlog: int) -> None:
        self.backlog = backlog
        self._lanes: dict[Hashable, _Lane] = {}
        self.stopped = False
        """Whether :meth:`stop` ran; no job starts after it."""

    @property
    def waiting(self) -> int:
        """Jobs queued and not started, over all keys."""
        return sum(len(lane.waiting) for lane in self._lanes.values())

    def submit(self, key: Hashable, job: Job) -> bool:
        """Queue ``job`` under ``key``; returns whether it was within the backlog."""
        if self.stopped:
            return False
        lane = self._lanes.setdefault(key, _Lane())
        within = len(lane.waiting) < self.backlog
        lane.waiting.append((job, not within))
        if lane.task is None or lane.task.done():
            lane.task = asyncio.ensure_future(self._drain(key, lane))
        return within

    async def _drain(self, key: Hashable, lane: _Lane) -> None:
        with no_reply_waits():
            while lane.waiting and not self.stopped:
                job, overflow = lane.waiting.popleft()
                try:
                    await job(overflow)
                except Exception:
                    logger.exception("a background job failed")
        if self._lanes.get(key) is lane and not lane.waiting:
            del self._lanes[key]

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until the jobs queued so far ran; True when that happened in time."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            running = [
                lane.task
                for lane in self._lanes.values()
                if lane.task is not None and not lane.task.done()
            ]
            if not running:
                return True
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            _, not_done = await asyncio.wait(running, timeout=left)
            if not_done:
                return False

    def stop(self) -> int:
        """Drop the waiting jobs and cancel the running ones; returns how many there were."""
        self.stopped = True
        left = 0
        for lane in self._lanes.values():
            left += len(lane.waiting) + int(lane.task is not None and not lane.task.done())
            lane.waiting.clear()
            if lane.task is not None:
                lane.task.cancel()
        return left


class TimeJudge:
    """Marks what each stored write's new memories update, extend or repeat.

    Args:
        backend: The memories' mem0 client.
        model: The AgentScope chat model asked the reading questions.
        candidates: Older memories related to each new memory.
        timeout: Seconds one model call may take.
        search_by_agent: Look among the writing agent's memories only
            (``scope_search_by_agent``), or among all of the user's.
        max_superseded: Older memories one write may supersede.
    """

    def __init__(
        self,
        backend: Mem0Backend,
        model: ChatModelBase,
        *,
        candidates: int = DEFAULT_JUDGE_CANDIDATES,
        timeout: float | None = DEFAULT_JUDGE_TIMEOUT,
        search_by_agent: bool = True,
        max_superseded: int = DEFAULT_MAX_SUPERSEDED,
    ) -> None:
        for name, value in (("candidates", candidates), ("max_superseded", max_superseded)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        self._backend = backend
        self._model = model
        self._candidates = candidates
        self._timeout = timeout
        self._search_by_agent = search_by_agent
        self._max_superseded = max_superseded
        self._latency = LatencyRecorder()
        counters = "batches pairs superseded extended same merged vetoed capped skipped dated"
        self._counts = dict.fromkeys(counters.split(), 0)
        self.meter: TokenMeter | None = None
        """Counts the tokens of the judgement's model calls, when set."""
        self.consolidates = True
        """``False`` leaves repeats current (to measure what consolidation costs)."""
        self.stopped = False
        """Set at close: a model call that ends afterwards stops the judgement."""

    def stats(self) -> dict[str, Any]:
        """``judge_*`` counters and the time per judged write."""
        out: dict[str, Any] = {f"judge_{k}": v for k, v in self._counts.items()}
        out.update(self._latency.summary("judge_latency"))
        return out

    async def judge(
        self, scope: Scope, results: Sequence[Any], said_at: datetime, *, ask: bool = True
    ) -> bool:
        """Judge the new memories mem0 stored for ``scope`` (``results``), said at
        ``said_at``, and store the verdicts. Never raises but for cancellation.

        Args:
            ask: Ask the model; ``False`` only dates them and merges what the
                words show (too many writes were waiting).

        Returns:
            Whether reads will show something changed.
        """
        new = new_memories(results)
        if not new:
            return False
        started = time.perf_counter()
        searched = scope.searched(by_agent=self._search_by_agent)
        with span("judge", user_id=scope.user_id, agent_id=scope.agent_id, new=len(new)) as handle:
            facts = [fact_of_result(item, said_at) for item in new]
            plan = ChangePlan(self._max_superseded, self._counts)
            for fact in facts:
                plan.date(fact)
            self._counts["batches"] += 1
            if not ask:
                self._counts["skipped"] += 1
                handle.set(skipped=True)
            try:
                await self._relate_all(scope, facts, searched, plan, handle, ask=ask)
            except Exception as exc:
                logger.warning(
                    "the time judgement for user %s stopped (%s); the rest of this "
                    "write is not judged",
                    scope.user_id,
                    exc,
                )
            handle.set(changed=len(plan.changes))
            await plan.write(self._backend, scope, self._timeout)
        self._latency.record(time.perf_counter() - started)
        return plan.shows_change

    async def _relate_all(
        self,
        scope: Scope,
        facts: list[Fact],
        searched: Scope,
        plan: ChangePlan,
        handle: SpanHandle,
        *,
        ask: bool,
    ) -> None:
        """Relate each new memory to its candidates, planning the changes in ``plan``.

        One search per new memory finds the candidates of both questions: does
        it repeat one of them (its words, then the model), and does it change
        or extend one. A model call that fails or is late ends the model's
        part: the rest of the write is only compared by words.
        """
        pairs = PairJudge(lambda system, user: self._ask(handle, system, user))
        batch = {fact.id for fact in facts}
        names = user_names(scope.user_id)
        pool = max(self._candidates, DEFAULT_CONSOLIDATION_CANDIDATES)
        kept_new: list[tuple[Fact, FactShape]] = []
        capped = self._counts["capped"]
        try:
            for index, new in enumerate(facts):
                hits = await self._backend.search(new.text, searched, top_k=pool + len(batch))
                olds = [fact_of_hit(h) for h in hits if h.id and h.id not in batch | plan.replaced]
                olds = olds[:pool]
                handle.count(candidates=len(olds))
                names_here = names | user_names(None, [new.text, *(o.text for o in olds)])
                shape = fact_shape(new.text, names_here)
                shaped = [(old, fact_shape(old.text, names_here)) for old in olds]
                others = [*kept_new, *shaped]
                at = (
                    await first_repeat(shape, [s for _, s in others]) if self.consolidates else None
                )
                if at is not None:
                    plan.merge(new, others[at][0])
                    continue
                if ask and index < _MAX_NEW_JUDGED:
                    try:
                        if await self._relate(pairs, new, shape, shaped, plan, handle):
                            continue  # a repeat: not a candidate for the write's other memories
                    except Exception as exc:
                        ask = False
                        late = isinstance(exc, TimeoutError)
                        self._counts["skipped"] += 1
                        handle.set(skipped=True, timed_out=late)
                        logger.warning(
                            "the time judgement for user %s stopped (%s); the rest of "
                            "this write is only compared by its words",
                            scope.user_id,
                            f"no answer within {self._timeout} s" if late else exc,
                        )
                kept_new.append((new, shape))
        finally:
            for fact in facts:
                plan.keep_question(fact)
            if self._counts["capped"] > capped:
                logger.warning(
                    "one write would have superseded more than %d memories; the rest "
                    "are kept current",
                    self._max_superseded,
                )

    async def _relate(
        self,
        pairs: PairJudge,
        new: Fact,
        shape: FactShape,
        shaped: list[tuple[Fact, FactShape]],
        plan: ChangePlan,
        handle: SpanHandle,
    ) -> bool:
        """Ask the model how ``new`` relates to its candidates; plan what follows.

        Relating stops at a repeat: the memory kept then stands for the new
        one in the changes found before it.

        Returns:
            Whether ``new`` was merged into a candidate.
        """
        changed: list[Fact] = []
        extended: Fact | None = None
        kept: Fact | None = None
        try:
            for old, other in shaped[: self._candidates]:
                try:
                    relation = await pairs.relate(new, old)
                finally:
                    plan.keep_question(old)
                self._counts["pairs"] += 1
                handle.count(**{f"pairs_{relation.value}": 1})
                if relation is Relation.CHANGES:
                    changed.append(old)
                elif relation is Relation.EXTENDS and extended is None:
                    extended = old
                elif relation is Relation.SAME:
                    self._counts["same"] += 1
                    if not self.consolidates:
                        continue
                    reason = kept_apart(shape, other)
                    if reason is None:
                        kept = old
                        break
                    self._counts["vetoed"] += 1
                    handle.count(vetoed=1)
                    logger.debug("%r and %r read alike but differ: %s", new.text, old.text, reason)
        finally:
            holder = new if kept is None else plan.merge(new, kept)
            for old in changed:
                plan.supersede(holder, old)
            if extended is not None and kept is None:
                plan.extend(new, extended)
        return kept is not None

    async def _ask(self, handle: SpanHandle, system: str, user: str) -> str:
        """One model call, within ``timeout``, with its span and its tokens counted."""
        from .._mem0.adapters import _final_response, flatten_response

        messages = [SystemMsg(name="system", content=system), UserMsg(name="user", content=user)]
        with model_span("judge_call", self._model) as call:
            response = await asyncio.wait_for(
                _final_response(self._model, messages, None), self._timeout
            )
            if self.stopped:
                raise asyncio.CancelledError  # AgentScope swallowed stop()'s cancellation
            if getattr(response, "finished_reason", None) == "interrupted":
                # AgentScope's ChatModelBase answers a cancelled call (wait_for's
                # timeout) with an empty "interrupted" response instead of raising.
                raise TimeoutError(f"no answer within {self._timeout} s")
            answer = flatten_response(response, with_tools=False)
            text = answer if isinstance(answer, str) else str(answer)
            tokens = await asyncio.to_thread(self._count, response.usage, f"{system}\n{user}", text)
            call.usage(tokens)
            handle.usage(tokens)
            call.set_text("response", text)
        return text

    def _count(self, usage: Any, prompt: str, answer: str) -> CallTokens:
        with metered(self.meter, "judge"):
            return record_call(usage, prompt, answer)


class ChangePlan:
    """One write's verdicts as metadata changes, by memory id, stored at the end.

    It keeps the rules that span pairs (the later said of two conflicting
    memories wins; at most ``max_superseded`` memories superseded per write;
    a repeat merged into the memory kept) and stores the changes in an order
    that hides nothing if it stops halfway.

    Args:
        max_superseded: Older memories the write may supersede.
        counts: The judge's counters (``superseded``, ``capped``,
            ``extended``, ``merged``, ``dated``).
    """

    def __init__(self, max_superseded: int, counts: dict[str, int]) -> None:
        self.changes: dict[str, dict[str, Any]] = {}
        self.replaced: set[str] = set()
        """Ids superseded by this write (no longer candidates)."""
        self._max_superseded = max_superseded
        self._counts = counts

    def date(self, fact: Fact) -> None:
        """Store ``fact``'s event date, when its text gave one."""
        if fact.event_date:
            self.changes.setdefault(fact.id, {})[EVENT_DATE] = fact.event_date
            self._counts["dated"] += 1

    def supersede(self, new: Fact, old: Fact) -> None:
        """Mark the earlier said of ``new`` and ``old`` superseded by the other, within the cap."""
        # The later said one wins, so a backfilled older fact does not hide a newer one.
        newer, older = (new, old) if _said_later(new, old) else (old, new)
        if older.id in self.replaced:
            return
        if len(self.replaced) >= self._max_superseded:
            self._counts["capped"] += 1
            return
        self.replaced.add(older.id)
        self._counts["superseded"] += 1
        newer_changes = self.changes.setdefault(newer.id, {})
        newer_changes[SUPERSEDES] = [*newer_changes.get(SUPERSEDES, newer.supersedes), older.id]
        self.changes.setdefault(older.id, {}).update(
            {
                SUPERSEDED_BY: newer.id,
                VALID_UNTIL: retired_since(newer.said, newer.event_date, older.said),
            }
        )

    def extend(self, new: Fact, old: Fact) -> None:
        """Mark ``new`` as adding detail to ``old``."""
        self._counts["extended"] += 1
        self.changes.setdefault(new.id, {})[EXTENDS] = old.id

    def merge(self, repeat: Fact, kept: Fact) -> Fact:
        """Mark ``repeat`` a duplicate of ``kept``, merged when ``repeat`` was said.

        Returns:
            ``kept`` as it now stands for ``repeat``'s fact: its id, the
            repeat's said time and event date (a change the repeat brings is
            made by the memory kept).
        """
        duplicates = self.changes.get(kept.id, {}).get(DUPLICATES, kept.duplicates)
        said_at = repeat.said or datetime.now(UTC)
        for memory_id, change in duplicate_marks(repeat.id, kept.id, duplicates, said_at):
            self.changes.setdefault(memory_id, {}).update(change)
        self._counts["merged"] += 1
        return dataclasses.replace(
            kept,
            said=repeat.said,
            event_date=repeat.event_date,
            supersedes=self.changes[kept.id].get(SUPERSEDES, kept.supersedes),
        )

    def keep_question(self, fact: Fact) -> None:
        """Store a question the model was asked for, so it is not asked again."""
        if fact.question_asked and fact.question is not None:
            self.changes.setdefault(fact.id, {}).update(
                {FACT_QUESTION: fact.question.question, FACT_ANSWER: fact.question.answer}
            )

    @property
    def shows_change(self) -> bool:
        """Whether reads will show something changed (not only kept questions)."""
        seen = {key for change in self.changes.values() for key in change}
        return bool(seen - {FACT_QUESTION, FACT_ANSWER})

    async def write(self, backend: Mem0Backend, scope: Scope, timeout: float | None) -> None:
        """Store the changes; those hiding a memory last, so a stop halfway hides nothing."""
        order = sorted(self.changes, key=lambda i: any(k in self.changes[i] for k in _HIDING))
        for memory_id in order:
            try:
                await asyncio.wait_for(
                    backend.update_metadata(memory_id, self.changes[memory_id]), timeout
                )
            except Exception as exc:
                logger.warning(
                    "could not store the time judgement on memory %s of user %s: %s",
                    memory_id,
                    scope.user_id,
                    exc,
                )


def _said_later(new: Fact, old: Fact) -> bool:
    """Whether ``new`` is the later said of the two (ties: the new one)."""
    if old.said is None or new.said is None:
        return True
    return new.said >= old.said


def fact_of_result(item: Mapping[str, Any], said_at: datetime) -> Fact:
    """A new memory of mem0's ``add`` results, said at ``said_at``."""
    when = item.get(EVENT_DATE)
    return Fact(
        id=str(item["id"]),
        text=str(item["memory"]),
        said=said_at,
        event_date=when if isinstance(when, str) else None,
    )


def fact_of_hit(hit: MemoryHit) -> Fact:
    """An older memory found by the candidate search."""
    metadata = hit.metadata or {}
    return Fact(
        id=str(hit.id),
        text=hit.memory,
        said=parse_time(metadata.get(VALID_FROM) or metadata.get(SAID_AT) or hit.created_at),
        event_date=event_date_of(hit),
        question=question_of_metadata(metadata),
        supersedes=ids_of(metadata.get(SUPERSEDES)),
        duplicates=ids_of(metadata.get(DUPLICATES)),
    )


def judge_model_of(client: Any) -> ChatModelBase | None:
    """The AgentScope chat model a mem0 client extracts with, if it uses one."""
    from agentscope.model import ChatModelBase

    model = getattr(getattr(client, "llm", None), "model", None)
    return model if isinstance(model, ChatModelBase) else None


def build_time_judge(
    backend: Mem0Backend,
    judge: Any,
    *,
    timeout: float | None = DEFAULT_JUDGE_TIMEOUT,
    search_by_agent: bool = True,
) -> TimeJudge | None:
    """The judge for the middleware's ``judge`` keyword, or ``None`` when off.

    ``True`` takes the AgentScope model the client extracts with; a client
    built with another LLM has none, and hosted mem0 keeps its own timeline,
    so both go without (logged once at INFO).

    Raises:
        ConfigurationError: ``judge`` is neither a bool nor an AgentScope chat model.
    """
    from agentscope.model import ChatModelBase

    from .._exceptions import ConfigurationError

    if judge is False:
        return None
    if judge is True:
        if backend.hosted:
            logger.info("hosted mem0 keeps its own timeline: no time judgement here")
            return None
        model = judge_model_of(backend.client)
        if model is None:
            logger.info(
                "the mem0 client does not extract with an AgentScope model, so new memories "
                "are not judged against older ones; pass judge_model=<an AgentScope chat model>"
            )
            return None
    elif isinstance(judge, ChatModelBase):
        model = judge
    else:
        raise ConfigurationError(
            f"judge must be True, False or an AgentScope chat model, got {judge!r}"
        )
    return TimeJudge(backend, model, timeout=timeout, search_by_agent=search_by_agent)
