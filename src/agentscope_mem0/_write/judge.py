"""What follows a stored write: the time judgement, and one current memory per fact.

mem0 2.2's extraction only ever adds, so "User lives in Hangzhou" and, later,
"User moved to Beijing" would both be recalled as true, and a fact said
twice (in other words, or by both ``add_memory`` and the automatic extraction
of one turn) would be two memories. After each stored write,
:class:`TimeJudge` takes each new memory in write order, looks up the few
older memories of the user most like it (one vector search; the same scope
the reads search) and relates it to the write's earlier memories and to
those (a change told later in the same message, or in a turn joined to the
same mem0 call, supersedes what was told before it): a repeat marks the new
one a duplicate of the older (consolidation), and, with a model, a change
marks the older memory superseded and a detail marks the new one as
extending it, one pair at a time (:mod:`.judge_pairs`). The verdicts are
metadata (:class:`ChangePlan`, :mod:`.._memories.lifecycle`): nothing is
deleted; superseded memories and repeats are only left out of reads,
``export`` and ``history`` keep them, and forgetting the memory kept forgets
its repeats too.

The candidates are the memories the reads of the write's scope show (one
scope for judging and reading: :meth:`TimeJudge.searched`), superseded ones
included: a new memory that states the fact of a superseded memory (by the
words) supersedes the memory that took its place, so a fact told again is
current again (:meth:`TimeJudge._told_again`). A repeat is merged only into
a memory that every read showing the repeat shows too
(:meth:`TimeJudge._may_merge`).

A repeat is decided by :func:`~.._text.same_fact.first_repeat`, the one place
that does: by the words when they show it, then, with a model, by the
model's readings, vetoed by the words (another person, negation, another
time, other numbers, another verb, more detail:
:func:`~.._text.same_fact.kept_apart`); without one (``judge=False``, hosted
mem0, a client that extracts with another LLM), by the embeddings' cosine
similarity of the pairs the words leave open (the client's own embedder;
none on hosted mem0, where the words decide alone). Hosted mem0 answers a
write with a pending event: the memories it became are looked up by the
write's key once the platform has them (:data:`HOSTED_WAITS`).

What keeps a small model from hiding true memories: it is only asked
reading questions about one memory at a time; a change must hold both ways
round; memories about another person, the past or one more item are never
changed; and one write supersedes at most ``max_superseded`` memories.

The judgement never holds up writes: the queue tells :class:`FollowUp`
(its :class:`~.queue.AfterStore`), which refreshes the profile cache and
queues the write per searched scope, judged in
order in the background (a later change must see the earlier one). Each
model call has ``timeout`` seconds; a call that fails or is late ends the
model's part of that write's judgement (counted as skipped): the rest of its
memories are only compared by their words. A failure or a late answer only
leaves a repeat current.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Protocol

from agentscope.message import SystemMsg, UserMsg

from .._mem0.call_context import metered, no_reply_waits, record_call
from .._memories.hit import normalise_hits
from .._memories.lifecycle import (
    DUPLICATE_OF,
    DUPLICATE_REASON,
    DUPLICATES,
    EVENT_DATE,
    EXTENDS,
    SAID_AT,
    SUPERSEDED_BY,
    SUPERSEDED_REASON,
    SUPERSEDES,
    VALID_FROM,
    VALID_UNTIL,
    event_date_of,
    ids_of,
    is_superseded,
    retired_since,
)
from .._observe.latency import LatencyRecorder
from .._observe.tracing import SpanHandle, model_span, span
from .._observe.usage import CallTokens, TokenMeter
from .._text.dates import iso, parse_time
from .._text.lexicon import segmenter_ready
from .._text.same_fact import (
    FactShape,
    as_user,
    cosine,
    fact_shape,
    first_repeat,
    kept_apart,
    same_fact,
    user_names,
)
from .delivery import METADATA_KEY
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
    "DEFAULT_CONSOLIDATION_CANDIDATES",
    "DEFAULT_JUDGE_CANDIDATES",
    "DEFAULT_JUDGE_TIMEOUT",
    "DEFAULT_MAX_SUPERSEDED",
    "HOSTED_WAITS",
    "ChangePlan",
    "FollowUp",
    "ProfileSignals",
    "TimeJudge",
    "build_time_judge",
    "judge_model_of",
    "new_memories",
]

logger = logging.getLogger(__name__)

DEFAULT_JUDGE_CANDIDATES = 3
"""Older memories related to each new memory (the most similar ones)."""

DEFAULT_JUDGE_TIMEOUT = 120.0
"""Seconds one model call of the judgement may take (as one extraction call)."""

DEFAULT_MAX_SUPERSEDED = 2
"""Older memories one stored write may supersede, however many facts it held."""

DEFAULT_CONSOLIDATION_CANDIDATES = 5
"""Current memories each new memory is checked against for a repeat."""

_CONSOLIDATION_TIMEOUT = 30.0
"""Seconds the pass without a model (lookups, embeddings, marks) may take per write."""

HOSTED_WAITS = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)
"""Seconds between looks for a hosted write's memories (about a minute in all)."""

_MAX_NEW_JUDGED = 8
"""New memories of one write that are related to older ones; the rest are only dated."""

_MAX_HOPS = 8
"""Memories followed from a superseded one to the one standing in its place."""

_JUDGE_BACKLOG = 32
"""Writes waiting for judgement per searched scope; beyond it new ones are only dated."""

_CONSOLIDATION_BACKLOG = 64
"""Writes waiting for consolidation per searched scope; beyond it new ones are not."""

_JUDGE_COUNTS = (
    "batches",
    "pairs",
    "superseded",
    "extended",
    "same",
    "merged",
    "vetoed",
    "capped",
    "skipped",
    "dated",
)
"""The counters ``stats()`` shows with a model (``judge_*``)."""

_CONSOLIDATION_COUNTS = ("batches", "compared", "merged", "embedded", "skipped")
"""The counters ``stats()`` shows without one (``consolidation_*``)."""

_HIDING = (SUPERSEDED_BY, DUPLICATE_OF)
"""Changes that take a memory out of reads: stored after every other change."""


class Cache(Protocol):
    """A cache of what a scope's memories say (the profile cache)."""

    def invalidate(self, scope: Scope) -> None:
        """Forget what a write to ``scope`` may change."""


class ProfileSignals(Protocol):
    """Who hears what the write path changed (the profile's refresher)."""

    def written(self, scope: Scope, new: int) -> None:
        """``new`` memories of ``scope`` were stored; returns at once."""

    def changed(self, scope: Scope) -> None:
        """The judgement changed what ``scope``'s reads show; returns at once."""


class FollowUp:
    """What follows each stored batch: the queue's :class:`~.queue.AfterStore`.

    The profile recall's cache is refreshed at once; the judgement runs in
    the background and refreshes it again when it changed what reads show. The
    writes of one searched scope are judged in order (a later change must see
    the earlier one), in one task per scope that nobody waits for; past the
    backlog a write is only dated (without a model: left alone). No reply
    waits for that work, so it runs under
    :func:`~.._mem0.call_context.no_reply_waits`: its mem0 reads take the write
    lane and its embeddings wait for every reply's query.

    Args:
        profile_recall: The cache of recall mode "profile".
        judge: The time judgement (or, without a model, consolidation alone).
        signals: Told of each batch's new memories and of each change the
            judgement made (the profile's refresher); ``None``: nobody.
    """

    def __init__(
        self, profile_recall: Cache, judge: TimeJudge, signals: ProfileSignals | None = None
    ) -> None:
        self._profile_recall = profile_recall
        self._judge = judge
        self._signals = signals
        self._backlog = _JUDGE_BACKLOG if judge.model is not None else _CONSOLIDATION_BACKLOG
        self._lanes: dict[Scope, _Lane] = {}
        self._stopped = False

    def stored(self, scope: Scope, results: list[dict[str, Any]], said_at: datetime) -> None:
        """Refresh ``scope``'s profile recall and queue the batch's judgement; returns
        at once (see :class:`~.queue.AfterStore`)."""
        self._profile_recall.invalidate(scope)
        if self._signals is not None and not self._stopped:
            self._signals.written(scope, len(new_memories(results)))
        judge = self._judge
        if self._stopped or not results or (judge.model is None and not judge.consolidates):
            return
        if judge.model is not None and not new_memories(results):
            return
        searched = judge.searched(scope)
        lane = self._lanes.setdefault(searched, _Lane())
        overflow = len(lane.waiting) >= self._backlog
        lane.waiting.append((scope, results, said_at, overflow))
        if lane.task is None or lane.task.done():
            lane.task = asyncio.ensure_future(self._drain(searched, lane))
        if overflow:
            logger.warning(
                "over %d writes of user %s wait for %s",
                self._backlog,
                scope.user_id,
                "the time judgement; this one is only dated"
                if judge.model is not None
                else "consolidation; repeats may stay current",
            )

    async def _drain(self, searched: Scope, lane: _Lane) -> None:
        with no_reply_waits():
            while lane.waiting and not self._stopped:
                scope, results, said_at, overflow = lane.waiting.popleft()
                try:
                    if overflow and self._judge.model is None:
                        self._judge.skip()
                    elif await self._judge.judge(scope, results, said_at, ask=not overflow):
                        self._profile_recall.invalidate(scope)  # what reads show changed
                        if self._signals is not None:
                            self._signals.changed(scope)
                except Exception:
                    logger.exception("the judgement of a write of user %s failed", scope.user_id)
        if self._lanes.get(searched) is lane and not lane.waiting:
            del self._lanes[searched]

    async def followed(self, scope: Scope) -> None:
        """Wait until the batches of ``scope`` stored so far are judged.

        A writer that shares its outbox with other replicas lets another take
        the scope only then, so one user's judgements never overlap.
        """
        lane = self._lanes.get(self._judge.searched(scope))
        if lane is not None and lane.task is not None and not lane.task.done():
            await asyncio.wait({lane.task})

    def stats(self) -> dict[str, Any]:
        """The judgement's counters (``judge_*``, or ``consolidation_*`` without
        a model), the writes waiting, and the background time per write."""
        out = self._judge.stats()
        waiting = sum(len(lane.waiting) for lane in self._lanes.values())
        out[f"{self._judge.prefix}_waiting"] = waiting
        return out

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until the writes queued so far are followed up; True when in time."""
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
        """Drop the writes waiting and cancel the running judgements (at close).

        The writes themselves are stored already; only their judgement is lost.

        Returns:
            How many writes were left.
        """
        self._stopped = self._judge.stopped = True
        left = 0
        for lane in self._lanes.values():
            left += len(lane.waiting) + int(lane.task is not None and not lane.task.done())
            lane.waiting.clear()
            if lane.task is not None:
                lane.task.cancel()
        if left and self._judge.model is not None:
            logger.info("%d writes were left without a time judgement at close", left)
        return left


@dataclass
class _Lane:
    """The writes of one searched scope waiting for their judgement, and the task
    judging them (``overflow``: past the backlog)."""

    waiting: deque[tuple[Scope, list[dict[str, Any]], datetime, bool]] = field(
        default_factory=deque
    )
    task: asyncio.Future[None] | None = None


class TimeJudge:
    """Marks what each stored write's new memories update, extend or repeat.

    Args:
        backend: The memories' mem0 client.
        model: The AgentScope chat model asked the reading questions; ``None``
            only merges repeats (consolidation).
        candidates: Older memories related to each new memory by the model.
        timeout: Seconds one model call may take.
        search_by_agent: Look among the writing agent's memories only
            (``scope_search_by_agent``), or among all of the user's.
        max_superseded: Older memories one write may supersede.
    """

    def __init__(
        self,
        backend: Mem0Backend,
        model: ChatModelBase | None,
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
        self.model = model
        """The model asked; ``None``: consolidation alone."""
        self._candidates = candidates
        self._timeout = timeout if model is not None else _CONSOLIDATION_TIMEOUT
        self.search_by_agent = search_by_agent
        """Whether the reads this judgement serves are scoped by agent
        (``scope_search_by_agent``); hosted mem0 reads every agent's memories."""
        self._max_superseded = max_superseded
        self._latency = LatencyRecorder()
        self.prefix = "judge" if model is not None else "consolidation"
        """The prefix of its ``stats()`` keys."""
        self._shown = _JUDGE_COUNTS if model is not None else _CONSOLIDATION_COUNTS
        self._counts = dict.fromkeys((*_JUDGE_COUNTS, *_CONSOLIDATION_COUNTS), 0)
        self.meter: TokenMeter | None = None
        """Counts the tokens of the judgement's model calls, when set."""
        self.consolidates = True
        """``False`` leaves repeats current (to measure what consolidation costs)."""
        self.hosted_waits: Sequence[float] = HOSTED_WAITS
        """Seconds between looks for a hosted write's memories."""
        self.stopped = False
        """Set at close: a model call that ends afterwards stops the judgement."""

    def stats(self) -> dict[str, Any]:
        """``judge_*`` (or ``consolidation_*``) counters and the time per judged write."""
        out: dict[str, Any] = {f"{self.prefix}_{k}": self._counts[k] for k in self._shown}
        out.update(self._latency.summary(f"{self.prefix}_latency"))
        return out

    def searched(self, scope: Scope) -> Scope:
        """The scope whose memories a write of ``scope`` is related to."""
        return scope.searched(by_agent=self.search_by_agent)

    def skip(self) -> None:
        """Count a write left alone: too many were waiting."""
        self._counts["skipped"] += 1

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
        new = new_memories(results) or await self._hosted_memories(scope, results)
        if not new:
            return False
        started = time.perf_counter()
        name = "judge" if self.model is not None else "consolidate"
        with span(name, user_id=scope.user_id, agent_id=scope.agent_id, new=len(new)) as handle:
            facts = [fact_of_result(item, said_at, scope.agent_id) for item in new]
            plan = ChangePlan(self._max_superseded, self._counts)
            if self.model is not None:
                for fact in facts:
                    plan.date(fact)
            self._counts["batches"] += 1
            if not ask:
                self._counts["skipped"] += 1
                handle.set(skipped=True)
            relating = self._relate_all(scope, facts, plan, handle, ask=ask)
            try:
                if self.model is None:
                    await asyncio.wait_for(relating, self._timeout)
                else:
                    await relating
            except Exception as exc:
                if self.model is None:
                    self._counts["skipped"] += 1
                logger.warning(
                    "the %s for user %s stopped (%s); the rest of this write is not judged",
                    "time judgement" if self.model is not None else "consolidation",
                    scope.user_id,
                    exc or type(exc).__name__,
                )
            handle.set(changed=len(plan.changes))
            await plan.write(self._backend, scope, self._timeout)
        self._latency.record(time.perf_counter() - started)
        return plan.shows_change

    async def _hosted_memories(self, scope: Scope, results: Sequence[Any]) -> list[dict[str, Any]]:
        """The memories a hosted write became, found by its key once the platform
        processed it (mem0's platform answers ``add`` with a pending event)."""
        keys = {item.get(METADATA_KEY) for item in results if isinstance(item, dict)}
        keys.discard(None)
        if not self._backend.hosted or len(keys) != 1:
            return []
        key = str(keys.pop())
        for wait in self.hosted_waits:
            await asyncio.sleep(wait)
            try:
                found = await self._backend.get_all_raw(
                    scope, limit=100, where={"metadata": {METADATA_KEY: key}}
                )
            except Exception as exc:
                logger.info("could not look up a hosted write of user %s: %s", scope.user_id, exc)
                return []
            mine = new_memories([item for item in found if _carries_key(item, key)])
            if mine:
                return mine
        logger.info(
            "hosted mem0 had not stored a write of user %s after %.0f s; not consolidated",
            scope.user_id,
            sum(self.hosted_waits),
        )
        return []

    async def _relate_all(
        self,
        scope: Scope,
        facts: list[Fact],
        plan: ChangePlan,
        handle: SpanHandle,
        *,
        ask: bool,
    ) -> None:
        """Relate each new memory to its candidates, planning the changes in ``plan``.

        One search per new memory finds the candidates of both questions: does
        it repeat one of them (its words, then the model or the embeddings),
        and does it change or extend one. A model call that fails or is late
        ends the model's part: the rest of the write is only compared by words.
        """
        pairs = PairJudge(lambda system, user: self._ask(handle, system, user))
        batch = {fact.id for fact in facts}
        names = user_names(scope.user_id)
        pool = max(self._candidates, DEFAULT_CONSOLIDATION_CANDIDATES)
        searched = self.searched(scope)
        kept_new: list[tuple[Fact, FactShape]] = []
        capped = self._counts["capped"]
        ask = ask and self.model is not None
        try:
            for index, new in enumerate(facts):
                # Superseded memories too (twice the places, so the current ones
                # still fill theirs): a fact told again may be one of them.
                hits = await self._backend.search(
                    new.text, searched, top_k=2 * pool + len(batch), include_superseded=True
                )
                hits = [h for h in hits if h.id and h.id not in batch | plan.replaced]
                await segmenter_ready([new.text, *(h.memory for h in hits)])
                olds = [fact_of_hit(h) for h in hits if not is_superseded(h)][:pool]
                handle.count(candidates=len(olds))
                names_here = names | user_names(None, [new.text, *(o.text for o in olds)])
                shape = fact_shape(new.text, names_here)
                await self._told_again(
                    new, shape, [h for h in hits if is_superseded(h)], names_here, searched, plan
                )
                shaped = [
                    (old, fact_shape(old.text, names_here))
                    for old in olds
                    if old.id not in plan.replaced
                ]
                # A repeat is merged only into a memory every read showing it shows too.
                others = [*kept_new, *((o, s) for o, s in shaped if self._may_merge(scope, o))]
                if self.consolidates:
                    at = await self._first_repeat(new, shape, others, names_here)
                    if at is not None:
                        plan.merge(new, others[at][0], _repeat_reason(shape, others[at][1]))
                        logger.info(
                            "memory %s of user %s repeats memory %s: marked as its duplicate",
                            new.id,
                            scope.user_id,
                            others[at][0].id,
                        )
                        continue
                if ask and index < _MAX_NEW_JUDGED:
                    # The write's earlier memories first: a change told later in the same
                    # message (or in a turn joined to it) supersedes what it told before.
                    earlier = [(f, s) for f, s in kept_new if f.id not in plan.replaced]
                    candidates = [*earlier, *shaped[: self._candidates]]
                    try:
                        if await self._relate(pairs, scope, new, shape, candidates, plan, handle):
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

    def _may_merge(self, scope: Scope, old: Fact) -> bool:
        """Whether a repeat written in ``scope`` may be merged into ``old``: every
        read that shows the repeat must show ``old`` (an agent's reads show its
        own memories and the user's of no agent; unscoped reads show all)."""
        if not self.search_by_agent or self._backend.hosted:
            return True  # every read shows every agent's memories
        return old.agent_id in (None, scope.agent_id)

    async def _told_again(
        self,
        new: Fact,
        shape: FactShape,
        superseded: list[MemoryHit],
        names: frozenset[str],
        searched: Scope,
        plan: ChangePlan,
    ) -> None:
        """A fact told again: when ``new`` states the fact of a ``superseded``
        memory (by the words), the memory that now stands in its place, the
        one at the end of its ``superseded_by`` chain, is superseded by ``new``
        ("I moved back to Hangzhou" after "moved to Beijing" hid "lives in
        Hangzhou"); the later said of the two wins, as for any change."""
        if not superseded:
            return
        at = await first_repeat(shape, [fact_shape(h.memory, names) for h in superseded])
        if at is None:
            return
        standing = await self._standing_in_for(superseded[at], searched)
        if standing is not None and standing.id != new.id:
            logger.info(
                "memory %s tells again what memory %s said before memory %s replaced it",
                new.id,
                superseded[at].id,
                standing.id,
            )
            told = f"told again: it states superseded memory {superseded[at].id}'s fact"
            plan.supersede(new, standing, f"{told} ({_repeat_reason(shape, None)})")

    async def _standing_in_for(self, hit: MemoryHit, searched: Scope) -> Fact | None:
        """The current memory that took ``hit``'s place (following what superseded
        it, and what that one was merged into), when the reads of ``searched``
        show it."""
        seen: set[str] = set()
        metadata = hit.metadata or {}
        following = metadata.get(SUPERSEDED_BY)
        for _ in range(_MAX_HOPS):
            if not isinstance(following, str) or not following or following in seen:
                return None
            seen.add(following)
            entry = await self._backend.get(following)
            found = normalise_hits([entry]) if entry is not None else []
            if not found:
                return None
            metadata = found[0].metadata or {}
            following = metadata.get(SUPERSEDED_BY) or metadata.get(DUPLICATE_OF)
            if not following:
                shown = self._backend.hosted or searched.shows(found[0].agent_id)
                return fact_of_hit(found[0]) if shown else None
        return None

    async def _first_repeat(
        self,
        new: Fact,
        shape: FactShape,
        others: list[tuple[Fact, FactShape]],
        names: frozenset[str],
    ) -> int | None:
        """Which of ``others`` ``new`` repeats: by the words, then (without a
        model) by the embeddings of the pairs the words leave open."""
        if self.model is not None:
            return await first_repeat(shape, [s for _, s in others])
        self._counts["compared"] += len(others)

        async def similarities(open_pairs: list[int]) -> list[float | None] | None:
            texts = [new.text, *(others[i][0].text for i in open_pairs)]
            vectors = await self._backend.embed([as_user(text, names) for text in texts])
            if vectors is None:
                return None
            self._counts["embedded"] += len(vectors)
            return [cosine(vectors[0], vector) for vector in vectors[1:]]

        return await first_repeat(shape, [s for _, s in others], similarities=similarities)

    async def _relate(
        self,
        pairs: PairJudge,
        scope: Scope,
        new: Fact,
        shape: FactShape,
        candidates: list[tuple[Fact, FactShape]],
        plan: ChangePlan,
        handle: SpanHandle,
    ) -> bool:
        """Ask the model how ``new`` relates to each of ``candidates`` (the write's
        earlier memories, then the stored ones most like it); plan what follows.

        Relating stops at a repeat: the memory kept then stands for the new
        one in the changes found before it.

        Returns:
            Whether ``new`` was merged into a candidate.
        """
        changed: list[tuple[Fact, str]] = []
        extended: Fact | None = None
        kept: Fact | None = None
        why = ""
        try:
            for old, other in candidates:
                try:
                    verdict = await pairs.verdict(new, old)
                finally:
                    plan.keep_question(old)
                relation = verdict.relation
                self._counts["pairs"] += 1
                handle.count(**{f"pairs_{relation.value}": 1})
                if relation is Relation.CHANGES:
                    changed.append((old, verdict.reason))
                elif relation is Relation.EXTENDS and extended is None:
                    extended = old
                elif relation is Relation.SAME:
                    self._counts["same"] += 1
                    if not self.consolidates or not self._may_merge(scope, old):
                        continue
                    veto = kept_apart(shape, other)
                    if veto is None:
                        kept, why = old, verdict.reason
                        break
                    self._counts["vetoed"] += 1
                    handle.count(vetoed=1)
                    logger.debug("%r and %r read alike but differ: %s", new.text, old.text, veto)
        finally:
            holder = new if kept is None else plan.merge(new, kept, why)
            for old, reason in changed:
                plan.supersede(holder, old, reason)
            if extended is not None and kept is None:
                plan.extend(new, extended)
        return kept is not None

    async def _ask(self, handle: SpanHandle, system: str, user: str) -> str:
        """One model call, within ``timeout``, with its span and its tokens counted."""
        from .._mem0.adapters import _final_response, flatten_response

        assert self.model is not None  # only asked with a model
        messages = [SystemMsg(name="system", content=system), UserMsg(name="user", content=user)]
        with model_span("judge_call", self.model) as call:
            response = await asyncio.wait_for(
                _final_response(self.model, messages, None), self._timeout
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

    def supersede(self, new: Fact, old: Fact, reason: str) -> None:
        """Mark the earlier said of ``new`` and ``old`` superseded by the other, within
        the cap, with the ``reason`` (the readings or the rule that decided it)."""
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
                SUPERSEDED_REASON: reason,
                VALID_UNTIL: retired_since(newer.said, newer.event_date, older.said),
            }
        )

    def extend(self, new: Fact, old: Fact) -> None:
        """Mark ``new`` as adding detail to ``old``."""
        self._counts["extended"] += 1
        self.changes.setdefault(new.id, {})[EXTENDS] = old.id

    def merge(self, repeat: Fact, kept: Fact, reason: str) -> Fact:
        """Mark ``repeat`` a duplicate of ``kept``, merged when ``repeat`` was said,
        with the ``reason`` (the readings or the rule that decided it).

        Returns:
            ``kept`` as it now stands for ``repeat``'s fact: its id, the
            repeat's said time and event date (a change the repeat brings is
            made by the memory kept).
        """
        duplicates = self.changes.get(kept.id, {}).get(DUPLICATES, kept.duplicates)
        self.changes.setdefault(kept.id, {})[DUPLICATES] = [*duplicates, repeat.id]
        self.changes.setdefault(repeat.id, {}).update(
            {
                DUPLICATE_OF: kept.id,
                DUPLICATE_REASON: reason,
                VALID_UNTIL: iso(repeat.said or datetime.now(UTC)),
            }
        )
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


def _repeat_reason(shape: FactShape, other: FactShape | None) -> str:
    """Why the words (and maybe the embeddings) read two memories as one fact."""
    if other is None or same_fact(shape, other):
        return "words: the same holder, relation, values and content words"
    return "words and embeddings: the same content words, cosine similarity above the rule's"


def _said_later(new: Fact, old: Fact) -> bool:
    """Whether ``new`` is the later said of the two (ties: the new one)."""
    if old.said is None or new.said is None:
        return True
    return new.said >= old.said


def new_memories(results: Sequence[Any]) -> list[dict[str, Any]]:
    """The entries of mem0's ``add`` results that are new memories."""
    return [
        item
        for item in results
        if isinstance(item, dict)
        and item.get("id")
        and item.get("memory")
        and item.get("event", "ADD") == "ADD"
    ]


def _carries_key(item: dict[str, Any], key: str) -> bool:
    metadata = item.get("metadata")
    return isinstance(metadata, dict) and metadata.get(METADATA_KEY) == key


def fact_of_result(item: Mapping[str, Any], said_at: datetime, agent_id: str | None) -> Fact:
    """A new memory of mem0's ``add`` results, said at ``said_at`` to ``agent_id``."""
    when = item.get(EVENT_DATE)
    return Fact(
        id=str(item["id"]),
        text=str(item["memory"]),
        said=said_at,
        event_date=when if isinstance(when, str) else None,
        agent_id=agent_id,
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
        agent_id=hit.agent_id,
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
) -> TimeJudge:
    """The judgement for the middleware's ``judge`` keyword; its ``model`` is
    ``None`` when no model judges (repeats are still merged).

    ``True`` takes the AgentScope model the client extracts with; a client
    built with another LLM has none, and hosted mem0 keeps its own timeline,
    so both go without (logged once at INFO).

    Raises:
        ConfigurationError: ``judge`` is neither a bool nor an AgentScope chat model.
    """
    from agentscope.model import ChatModelBase

    from .._exceptions import ConfigurationError

    model: ChatModelBase | None = None
    if judge is True and backend.hosted:
        logger.info("hosted mem0 keeps its own timeline: no time judgement here")
    elif judge is True:
        model = judge_model_of(backend.client)
        if model is None:
            logger.info(
                "the mem0 client does not extract with an AgentScope model, so new memories "
                "are not judged against older ones; pass judge_model=<an AgentScope chat model>"
            )
    elif isinstance(judge, ChatModelBase):
        model = judge
    elif judge is not False:
        raise ConfigurationError(
            f"judge must be True, False or an AgentScope chat model, got {judge!r}"
        )
    return TimeJudge(backend, model, timeout=timeout, search_by_agent=search_by_agent)
