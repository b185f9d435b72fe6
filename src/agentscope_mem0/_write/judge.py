"""The time judgement: which older memories a stored write updates or extends.

mem0 2.2's extraction only ever adds, so "User lives in Hangzhou" and, later,
"User moved to Beijing" would both be recalled as true. After each stored
write, :class:`TimeJudge` takes each new memory, looks up the few older
memories of the user most like it (one vector search; the same scope the
reads search) and relates it to each, one pair at a time
(:mod:`.judge_pairs`): a change marks the older memory superseded, a detail
marks the new one as extending it. The verdicts are metadata
(:mod:`.._mem0.timeline`): nothing is deleted, superseded memories are only
left out of reads.

What keeps a small model from hiding true memories: it is only asked
reading questions about one memory at a time; a change must hold both ways
round; memories about another person, the past or one more item are never
changed; and one write supersedes at most ``max_superseded`` memories.

The judgement never holds up writes: :meth:`TimeJudge.after_store` queues
the write's memories and returns, and a task per user judges them in order
in the background. Each model call has ``timeout`` seconds; a call that fails
or is late ends that write's judgement (counted as skipped) and changes
nothing more.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentscope.message import SystemMsg, UserMsg

from .._mem0.breaker import LatencyRecorder
from .._mem0.dates import parse_time
from .._mem0.timeline import (
    EVENT_DATE,
    EXTENDS,
    SAID_AT,
    SUPERSEDED_BY,
    SUPERSEDES,
    VALID_FROM,
    VALID_UNTIL,
    event_date_of,
    retired_since,
)
from .._mem0.tracing import SpanHandle, model_span, span
from .._mem0.usage import CallTokens, TokenMeter, metered, record_call
from .consolidate import new_memories
from .judge_lanes import Lanes
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
    from .._mem0.hits import MemoryHit
    from .._scope import Scope

__all__ = [
    "DEFAULT_JUDGE_CANDIDATES",
    "DEFAULT_JUDGE_TIMEOUT",
    "DEFAULT_MAX_SUPERSEDED",
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

_BACKLOG = 32
"""Writes waiting for judgement per user; beyond it new ones are only dated."""


class TimeJudge:
    """Marks what each stored write's new memories update or extend.

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
        self._lanes = Lanes(backlog=_BACKLOG)
        self._counts = dict.fromkeys(
            (
                "batches",
                "pairs",
                "superseded",
                "extended",
                "same",
                "capped",
                "skipped",
                "dated",
            ),
            0,
        )
        self.meter: TokenMeter | None = None
        """Counts the tokens of the judgement's model calls, when set."""
        self.on_change: Callable[[Scope], None] | None = None
        """Called with the scope after the judgement changed some memory."""

    def stats(self) -> dict[str, Any]:
        """``judge_*`` counters, writes waiting, and the time per judged write."""
        out: dict[str, Any] = {f"judge_{k}": v for k, v in self._counts.items()}
        out["judge_waiting"] = self._lanes.waiting
        out.update(self._latency.summary("judge_latency"))
        return out

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until the writes queued so far are judged; True when that happened in time."""
        return await self._lanes.flush(timeout)

    def stop(self) -> int:
        """Stop judging: drop the waiting writes and cancel the judgements running.

        The writes themselves are stored already; only their judgement is lost.

        Returns:
            How many writes were left unjudged.
        """
        left = self._lanes.stop()
        if left:
            logger.info("%d writes were left without a time judgement at close", left)
        return left

    async def after_store(self, scope: Scope, results: Sequence[Any], said_at: datetime) -> None:
        """Queue the memories mem0 just stored for ``scope``, said at ``said_at``, and
        return. Never raises.

        Meant for the write queue's ``after_store``: the scope's next write
        does not wait for this judgement. The writes of one searched scope
        are judged in order.
        """
        new = new_memories(results)
        if not new:
            return
        searched = scope.searched(by_agent=self._search_by_agent)

        async def judge(overflow: bool) -> None:
            await self._judge(scope, searched, new, said_at, ask=not overflow)

        if not self._lanes.submit(searched, judge):
            logger.warning(
                "over %d writes of user %s wait for the time judgement; this one is only dated",
                _BACKLOG,
                scope.user_id,
            )

    # -- one write -------------------------------------------------------------

    async def _judge(
        self,
        scope: Scope,
        searched: Scope,
        new: list[dict[str, Any]],
        said_at: datetime,
        *,
        ask: bool,
    ) -> None:
        started = time.perf_counter()
        with span("judge", user_id=scope.user_id, agent_id=scope.agent_id, new=len(new)) as handle:
            facts = [_fact_of_result(item, said_at) for item in new]
            changes: dict[str, dict[str, Any]] = {}
            for fact in facts:
                if fact.event_date:
                    changes.setdefault(fact.id, {})[EVENT_DATE] = fact.event_date
                    self._counts["dated"] += 1
            self._counts["batches"] += 1
            if ask:
                try:
                    await self._relate_all(facts, searched, changes, handle)
                except Exception as exc:
                    late = isinstance(exc, TimeoutError)
                    self._counts["skipped"] += 1
                    handle.set(skipped=True, timed_out=late)
                    logger.warning(
                        "the time judgement for user %s stopped (%s); the rest of this "
                        "write is not judged",
                        scope.user_id,
                        f"no answer within {self._timeout} s" if late else exc,
                    )
            else:
                self._counts["skipped"] += 1
                handle.set(skipped=True)
            handle.set(changed=len(changes))
            await self._write(scope, changes)
        self._latency.record(time.perf_counter() - started)

    async def _relate_all(
        self,
        facts: list[Fact],
        searched: Scope,
        changes: dict[str, dict[str, Any]],
        handle: SpanHandle,
    ) -> None:
        """Relate each new memory to its candidates; plan the changes in ``changes``."""
        pairs = PairJudge(lambda system, user: self._ask(handle, system, user))
        batch = {fact.id for fact in facts}
        replaced: set[str] = set()
        capped = self._counts["capped"]
        try:
            for new in facts[:_MAX_NEW_JUDGED]:
                hits = await self._backend.search(
                    new.text, searched, top_k=self._candidates + len(batch)
                )
                olds = [_fact_of_hit(h) for h in hits if h.id and h.id not in batch | replaced]
                olds = olds[: self._candidates]
                handle.count(candidates=len(olds))
                extended = False
                for old in olds:
                    try:
                        relation = await pairs.relate(new, old)
                    finally:
                        _keep_question(old, changes)
                    self._counts["pairs"] += 1
                    handle.count(**{f"pairs_{relation.value}": 1})
                    if relation is Relation.CHANGES:
                        self._supersede(new, old, replaced, changes)
                    elif relation is Relation.EXTENDS and not extended:
                        extended = True
                        self._counts["extended"] += 1
                        changes.setdefault(new.id, {})[EXTENDS] = old.id
                    elif relation is Relation.SAME:
                        self._counts["same"] += 1
        finally:
            for fact in facts:
                _keep_question(fact, changes)
            if self._counts["capped"] > capped:
                logger.warning(
                    "one write would have superseded more than %d memories; the rest "
                    "are kept current",
                    self._max_superseded,
                )

    def _supersede(
        self, new: Fact, old: Fact, replaced: set[str], changes: dict[str, dict[str, Any]]
    ) -> None:
        """Mark the earlier said of ``new`` and ``old`` superseded by the other, within the cap."""
        # The later said one wins, so a backfilled older fact does not hide a newer one.
        newer, older = (new, old) if _said_later(new, old) else (old, new)
        if older.id in replaced:
            return
        if len(replaced) >= self._max_superseded:
            self._counts["capped"] += 1
            return
        replaced.add(older.id)
        self._counts["superseded"] += 1
        newer_changes = changes.setdefault(newer.id, {})
        newer_changes[SUPERSEDES] = [*newer_changes.get(SUPERSEDES, newer.supersedes), older.id]
        changes.setdefault(older.id, {}).update(
            {
                SUPERSEDED_BY: newer.id,
                VALID_UNTIL: retired_since(newer.said, newer.event_date, older.said),
            }
        )

    async def _ask(self, handle: SpanHandle, system: str, user: str) -> str:
        """One model call, within ``timeout``, with its span and its tokens counted."""
        from .._mem0.adapters import _final_response, flatten_response

        messages = [SystemMsg(name="system", content=system), UserMsg(name="user", content=user)]
        with model_span("judge_call", self._model) as call:
            response = await asyncio.wait_for(
                _final_response(self._model, messages, None), self._timeout
            )
            if self._lanes.stopped:
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

    async def _write(self, scope: Scope, changes: dict[str, dict[str, Any]]) -> None:
        """Store ``changes``: the newer memories' first, so a stop halfway hides nothing."""
        if not changes:
            return
        order = sorted(changes, key=lambda memory_id: SUPERSEDED_BY in changes[memory_id])
        for memory_id in order:
            try:
                await asyncio.wait_for(
                    self._backend.update_metadata(memory_id, changes[memory_id]), self._timeout
                )
            except Exception as exc:
                logger.warning(
                    "could not store the time judgement on memory %s of user %s: %s",
                    memory_id,
                    scope.user_id,
                    exc,
                )
        seen = {key for change in changes.values() for key in change}
        if self.on_change is not None and seen - {FACT_QUESTION, FACT_ANSWER}:
            self.on_change(scope)  # what reads show changed, not only the kept questions


def judge_model_of(client: Any) -> ChatModelBase | None:
    """The AgentScope chat model a mem0 client extracts with, if it uses one."""
    from agentscope.model import ChatModelBase

    model = getattr(getattr(client, "llm", None), "model", None)
    return model if isinstance(model, ChatModelBase) else None


def build_time_judge(
    backend: Mem0Backend,
    judge: Any,
    on_change: Callable[[Scope], None] | None = None,
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
                "are not judged against older ones; pass judge=<an AgentScope chat model>"
            )
            return None
    elif isinstance(judge, ChatModelBase):
        model = judge
    else:
        raise ConfigurationError(
            f"judge must be True, False or an AgentScope chat model, got {judge!r}"
        )
    time_judge = TimeJudge(backend, model, timeout=timeout, search_by_agent=search_by_agent)
    time_judge.on_change = on_change
    return time_judge


def _said_later(new: Fact, old: Fact) -> bool:
    """Whether ``new`` is the later said of the two (ties: the new one)."""
    if old.said is None or new.said is None:
        return True
    return new.said >= old.said


def _fact_of_result(item: dict[str, Any], said_at: datetime) -> Fact:
    when = item.get(EVENT_DATE)
    return Fact(
        id=str(item["id"]),
        text=str(item["memory"]),
        said=said_at,
        event_date=when if isinstance(when, str) else None,
    )


def _fact_of_hit(hit: MemoryHit) -> Fact:
    metadata = hit.metadata or {}
    supersedes = metadata.get(SUPERSEDES)
    return Fact(
        id=str(hit.id),
        text=hit.memory,
        said=parse_time(metadata.get(VALID_FROM) or metadata.get(SAID_AT) or hit.created_at),
        event_date=event_date_of(hit),
        question=question_of_metadata(metadata),
        supersedes=[s for s in supersedes if isinstance(s, str)]
        if isinstance(supersedes, list)
        else [],
    )


def _keep_question(fact: Fact, changes: dict[str, dict[str, Any]]) -> None:
    """Store a question the model was asked for, so it is not asked again."""
    if fact.question_asked and fact.question is not None:
        changes.setdefault(fact.id, {}).update(
            {FACT_QUESTION: fact.question.question, FACT_ANSWER: fact.question.answer}
        )
