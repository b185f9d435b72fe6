"""The time judgement: which older memories a stored write updates, extends or repeats.

mem0 2.2's extraction only ever adds, so "User lives in Hangzhou" and, later,
"User moved to Beijing" would both be recalled as true, and a fact said
twice would be two memories. After each stored write, :class:`TimeJudge`
takes each new memory, looks up the few older memories of the user most
like it (one vector search; the same scope the reads search) and relates it
to each, one pair at a time (:mod:`.judge_pairs`): a change marks the older
memory superseded, a detail marks the new one as extending it, and a repeat
marks the new one a duplicate of the older (consolidation, see
:mod:`.consolidate`). The verdicts are metadata (:mod:`.judge_plan`,
:mod:`.._memories.lifecycle`): nothing is deleted, superseded memories and
repeats are only left out of reads.

A repeat the words already show (:func:`~.._recall.same_fact.same_fact`)
costs no model call; the model's "same answer" merges only what the words do
not keep apart (another person, negation, another time, other numbers, another
verb, more detail: :func:`~.._recall.same_fact.kept_apart`).

What keeps a small model from hiding true memories: it is only asked
reading questions about one memory at a time; a change must hold both ways
round; memories about another person, the past or one more item are never
changed; and one write supersedes at most ``max_superseded`` memories.

The judgement never holds up writes: :meth:`TimeJudge.after_store` queues
the write's memories and returns, and a task per user judges them in order
in the background. Each model call has ``timeout`` seconds; a call that fails
or is late ends the model's part of that write's judgement (counted as
skipped): the rest of its memories are only compared by their words.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from agentscope.message import SystemMsg, UserMsg

from .._mem0.call_context import metered, record_call
from .._observe.latency import LatencyRecorder
from .._observe.tracing import SpanHandle, model_span, span
from .._observe.usage import CallTokens, TokenMeter
from .._text.same_fact import FactShape, fact_shape, kept_apart, same_fact, user_names
from .consolidate import DEFAULT_CONSOLIDATION_CANDIDATES, new_memories
from .judge_lanes import Lanes
from .judge_pairs import Fact, PairJudge, Relation
from .judge_plan import ChangePlan, fact_of_hit, fact_of_result

if TYPE_CHECKING:
    from agentscope.model import ChatModelBase

    from .._mem0.backend import Mem0Backend
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
                "merged",
                "vetoed",
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
        self.consolidates = True
        """``False`` leaves repeats current (to measure what consolidation costs)."""

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
            if self.on_change is not None and plan.shows_change:
                self.on_change(scope)  # what reads show changed, not only the kept questions
        self._latency.record(time.perf_counter() - started)

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
                repeated = self._repeated_by_words(shape, [*kept_new, *shaped])
                if repeated is not None:
                    plan.merge(new, repeated)
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

    def _repeated_by_words(
        self, shape: FactShape, candidates: list[tuple[Fact, FactShape]]
    ) -> Fact | None:
        """The first candidate whose words show it states the same fact."""
        if not self.consolidates:
            return None
        return next((old for old, other in candidates if same_fact(shape, other)), None)

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
                "are not judged against older ones; pass judge_model=<an AgentScope chat model>"
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
