"""The time judgement: which older memories a batch of new ones updates or extends.

mem0 2.2's extraction only ever adds, so "User lives in Hangzhou" and, later,
"User moved to Beijing" would both be recalled as true. After each stored
write, :class:`TimeJudge` looks up, per new memory, a handful of existing
memories of the same scope (one vector search each), and asks the chat model
once per written batch which of them each new memory *updates* (makes no
longer true) or *extends* (adds detail to). The verdicts become metadata
(:mod:`._time`): nothing is deleted, superseded memories are only left out of
reads.

It runs in the background after the write was stored, never on a reply,
within ``timeout`` seconds. An answer that fails, is late or does not follow
the schema changes nothing and is counted as skipped: the worst a bad
judgement can do is leave a stale memory current, or hide a memory of the
same scope that the model named explicitly as changed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
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
from .._mem0.tracing import SpanHandle, span
from .judge_prompt import JUDGE_MARK, JUDGE_SYSTEM_PROMPT, Verdict, judge_prompt, parse_verdicts

if TYPE_CHECKING:
    from agentscope.model import ChatModelBase

    from .._mem0.backend import Mem0Backend
    from .._mem0.hits import MemoryHit
    from .._scope import Scope

__all__ = [
    "DEFAULT_JUDGE_CANDIDATES",
    "DEFAULT_JUDGE_TIMEOUT",
    "JUDGE_MARK",
    "JUDGE_SYSTEM_PROMPT",
    "TimeJudge",
    "Verdict",
    "build_time_judge",
    "judge_model_of",
    "judge_prompt",
    "parse_verdicts",
]

logger = logging.getLogger(__name__)

DEFAULT_JUDGE_CANDIDATES = 5
"""Existing memories looked up per new memory."""

DEFAULT_JUDGE_TIMEOUT = 30.0
"""Seconds the lookups and the model's answer may take per batch."""

_MAX_UPDATES = 3
"""A new memory said to replace more than this many is not believed."""

_MAX_CANDIDATES = 20


@dataclass
class _Memory:
    id: str
    text: str
    said: datetime | None
    supersedes: list[str] = field(default_factory=list)
    event_date: str | None = None


def _said_of(metadata: Mapping[str, Any] | None, fallback: str | None) -> datetime | None:
    meta = metadata or {}
    return parse_time(meta.get(VALID_FROM) or meta.get(SAID_AT) or fallback)


class TimeJudge:
    """Marks what each stored batch of new memories updates or extends.

    Args:
        backend: The memories' mem0 client.
        model: The AgentScope chat model asked for the judgement.
        candidates: Existing memories looked up per new memory.
        timeout: Seconds the lookups and the model may take per batch.
    """

    def __init__(
        self,
        backend: Mem0Backend,
        model: ChatModelBase,
        *,
        candidates: int = DEFAULT_JUDGE_CANDIDATES,
        timeout: float | None = DEFAULT_JUDGE_TIMEOUT,
    ) -> None:
        if not isinstance(candidates, int) or candidates < 1:
            raise ValueError(f"candidates must be a positive integer, got {candidates!r}")
        self._backend = backend
        self._model = model
        self._candidates = candidates
        self._timeout = timeout
        self._latency = LatencyRecorder()
        self._running: set[asyncio.Future[Any]] = set()
        self._counts = dict.fromkeys(
            ("batches", "judged", "skipped", "superseded", "extended", "dated"), 0
        )
        self.on_change: Callable[[Scope], None] | None = None
        """Called with the scope after the judgement changed some memory."""

    def stats(self) -> dict[str, Any]:
        """``judge_*`` counters and the extra write-path latency per judged batch."""
        out: dict[str, Any] = {f"judge_{k}": v for k, v in self._counts.items()}
        out.update(self._latency.summary("judge_latency"))
        return out

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait for the judgements running now; True when they finished in time."""
        pending = [task for task in self._running if not task.done()]
        if not pending:
            return True
        _, not_done = await asyncio.wait(pending, timeout=timeout)
        return not not_done

    async def after_store(self, scope: Scope, results: Sequence[Any], said_at: datetime) -> None:
        """Judge the memories mem0 just stored for ``scope``, said at ``said_at``. Never raises.

        Meant for the write queue's ``after_store``: it runs after the write
        was stored, in the scope's background worker.
        """
        task = asyncio.ensure_future(self._judge(scope, results, said_at))
        self._running.add(task)
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.exception("the time judgement for user %s failed", scope.user_id)
        finally:
            if task.done():
                self._running.discard(task)
            else:
                task.add_done_callback(self._running.discard)

    # -- one batch ------------------------------------------------------------

    async def _judge(self, scope: Scope, results: Sequence[Any], said_at: datetime) -> None:
        with span("judge", user_id=scope.user_id, agent_id=scope.agent_id) as handle:
            await self._judge_batch(scope, results, said_at, handle)

    async def _judge_batch(
        self, scope: Scope, results: Sequence[Any], said_at: datetime, handle: SpanHandle
    ) -> None:
        new = [
            item
            for item in results
            if isinstance(item, dict)
            and item.get("id")
            and item.get("memory")
            and item.get("event", "ADD") == "ADD"
        ]
        handle.set(new=len(new))
        if not new:
            return
        changes: dict[str, dict[str, Any]] = {}
        for item in new:
            if isinstance(item.get(EVENT_DATE), str):
                changes.setdefault(item["id"], {})[EVENT_DATE] = item[EVENT_DATE]
                self._counts["dated"] += 1
        self._counts["batches"] += 1
        started = time.perf_counter()
        try:
            try:
                asked = await asyncio.wait_for(self._ask(scope, new, said_at), self._timeout)
            except TimeoutError:
                logger.warning(
                    "the time judgement for user %s took over %s s; skipped",
                    scope.user_id,
                    self._timeout,
                )
                handle.set(timed_out=True)
                asked = None
            except Exception as exc:
                logger.warning(
                    "the time judgement for user %s failed (%s); skipped", scope.user_id, exc
                )
                asked = None
            if asked is None:
                self._counts["skipped"] += 1
                handle.set(skipped=True)
            else:
                verdicts, news, existing = asked
                handle.set(candidates=len(existing), verdicts=len(verdicts))
                if existing:
                    self._counts["judged"] += 1
                self._plan(verdicts, news, existing, changes)
            handle.set(changed=len(changes))
            await self._write(scope, changes)
        finally:
            self._latency.record(time.perf_counter() - started)

    async def _ask(
        self, scope: Scope, new: list[dict[str, Any]], said_at: datetime
    ) -> tuple[list[Verdict], dict[str, _Memory], dict[str, _Memory]] | None:
        """Look up candidates and ask the model; ``None`` when its answer is unusable.

        Returns:
            The verdicts and the memories behind the keys, or empty verdicts
            when there was nothing to ask about.
        """
        batch = {str(item["id"]) for item in new}
        news = {
            f"N{i}": _Memory(
                id=str(item["id"]),
                text=str(item["memory"]),
                said=said_at,
                event_date=item.get(EVENT_DATE) if isinstance(item.get(EVENT_DATE), str) else None,
            )
            for i, item in enumerate(new, 1)
        }
        found = await asyncio.gather(
            *(
                self._backend.search(m.text, scope, top_k=self._candidates + len(batch))
                for m in news.values()
            )
        )
        existing: dict[str, _Memory] = {}
        by_id: dict[str, str] = {}
        for hits in found:
            for hit in hits:
                if not hit.id or hit.id in batch or hit.id in by_id:
                    continue
                if len(by_id) >= _MAX_CANDIDATES:
                    break
                key = f"E{len(existing) + 1}"
                by_id[hit.id] = key
                existing[key] = _memory_of(hit)
        if not existing:
            return [], news, existing
        prompt = judge_prompt(
            [(k, m.text, m.said) for k, m in news.items()],
            [(k, m.text, m.said) for k, m in existing.items()],
        )
        answer = await self._call_model(prompt)
        verdicts = parse_verdicts(answer, list(news), list(existing))
        if verdicts is None:
            logger.warning(
                "the time judgement for user %s answered outside the schema; skipped: %.200s",
                scope.user_id,
                answer,
            )
            return None
        return verdicts, news, existing

    async def _call_model(self, prompt: str) -> str:
        from .._mem0.adapters import _final_response, flatten_response

        messages = [
            SystemMsg(name="system", content=JUDGE_SYSTEM_PROMPT),
            UserMsg(name="user", content=prompt),
        ]
        response = await _final_response(self._model, messages, None)
        answer = flatten_response(response, with_tools=False)
        return answer if isinstance(answer, str) else str(answer)

    def _plan(
        self,
        verdicts: list[Verdict],
        news: dict[str, _Memory],
        existing: dict[str, _Memory],
        changes: dict[str, dict[str, Any]],
    ) -> None:
        """Turn verdicts into metadata changes (in ``changes``, by memory id)."""
        replaced: set[str] = set()
        for verdict in verdicts:
            new = news[verdict.new]
            if len(verdict.updates) > _MAX_UPDATES:
                logger.warning(
                    "the time judgement said one memory replaces %d; not believed",
                    len(verdict.updates),
                )
                continue
            for key in verdict.updates:
                old = existing[key]
                if old.text.strip().casefold() == new.text.strip().casefold():
                    continue
                # The later said one wins, so a backfilled older fact does not
                # hide a newer one already stored.
                newer, older = (new, old) if _order(old, new) else (old, new)
                if older.id in replaced:
                    continue
                replaced.add(older.id)
                self._counts["superseded"] += 1
                newer_changes = changes.setdefault(newer.id, {})
                ids = newer_changes.get(SUPERSEDES, newer.supersedes)
                newer_changes[SUPERSEDES] = [*ids, older.id]
                changes.setdefault(older.id, {}).update(
                    {
                        SUPERSEDED_BY: newer.id,
                        VALID_UNTIL: retired_since(newer.said, newer.event_date, older.said),
                    }
                )
            for key in verdict.extends[:1]:
                old = existing[key]
                self._counts["extended"] += 1
                changes.setdefault(new.id, {})[EXTENDS] = old.id

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
        if self.on_change is not None:
            self.on_change(scope)


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
    time_judge = TimeJudge(backend, model, timeout=timeout)
    time_judge.on_change = on_change
    return time_judge


def _order(old: _Memory, new: _Memory) -> bool:
    """Whether ``new`` is the later said of the two (ties: the new one)."""
    if old.said is None or new.said is None:
        return True
    return new.said >= old.said


def _memory_of(hit: MemoryHit) -> _Memory:
    metadata = hit.metadata or {}
    supersedes = metadata.get(SUPERSEDES)
    return _Memory(
        id=str(hit.id),
        text=hit.memory,
        said=_said_of(metadata, hit.created_at),
        supersedes=[s for s in supersedes if isinstance(s, str)]
        if isinstance(supersedes, list)
        else [],
        event_date=event_date_of(hit),
    )
