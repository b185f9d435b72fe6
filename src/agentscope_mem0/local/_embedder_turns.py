"""Whose turn the offline embedding engine is: a reply's short query never waits.

The engine spreads each call over every core, so many calls side by side
would only slow each other down; but a call that must wait for another pays
that call's whole duration, seconds for a long text on a busy machine. So the
engine has two turns, each taken by one call at a time:

* the **query turn**, for :attr:`Rank.QUERY`, a reply's short search query.
  The short queries waiting when it frees up are embedded in one call
  (measured on two busy cores: 50 short queries took 2.2 s in one call,
  4.3 s one by one).
* the **work turn**, for everything else, by rank and then arrival:
  :attr:`Rank.LONG_QUERY`, a reply's query of more than
  :data:`SHORT_QUERY_TOKENS` tokens (a pasted page), then
  :attr:`Rank.BACKGROUND`, what no reply waits for: the texts mem0 stores
  and the exchanges its ``add`` compares with stored memories (embedded as
  queries, but sized like passages), in pieces of at most one full-length
  text.

A short query runs beside whatever the work turn holds (measured on the
shared two-core machine, under load: 0.02-0.06 s for a short query beside a
512-token passage, against the passage's 3-8 s it would otherwise wait for),
and never shares a call with a long text: the engine concatenates the texts
of a call, so a query sharing it would pay for the page.

A reply's query may come with a budget: the most seconds it may wait and
take. The turns keep the engine's recent pace for queries (seconds per token,
an average over the last calls) and refuse a query at once
(:class:`~agentscope_mem0.EmbedderBusyError`) when the short
queries ahead of it and its own tokens would take longer at that pace; the
reply then searches by keywords alone instead of waiting. A query with no
query ahead of it is never refused (the first one, before any pace is known,
included): it measures the pace again, so a pace that one slow call pushed
up comes back down once the queue is empty.

Side by side, the two calls still share the cores. Background calls run on a
thread of their own with a lower CPU priority (a niceness of
:data:`BACKGROUND_NICENESS` more than the process; the engine's own threads,
started from it, inherit it), so when the cores are busy a reply's query, and
the event loop the replies run on, get them first, and mem0's writes take the
time that is left.
"""

from __future__ import annotations

import concurrent.futures
import enum
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._exceptions import EmbedderBusyError

__all__ = ["BACKGROUND_NICENESS", "SHORT_QUERY_TOKENS", "EngineTurns", "Rank"]

logger = logging.getLogger(__name__)

SHORT_QUERY_TOKENS = 128
"""Tokens of a query that still counts as short (a question, a request; the
query prefix and the special tokens included)."""

# Tokens of short queries embedded in one call; more wait for the next call.
_QUERY_BATCH_TOKENS = 4096

BACKGROUND_NICENESS = 10
"""How much lower the CPU priority of background engine calls is (Unix nice)."""

# Weight of the latest query call in the engine's pace (seconds per token).
_PACE_WEIGHT = 0.25


class Rank(enum.IntEnum):
    """What an engine call is for; lower goes first."""

    QUERY = 0
    LONG_QUERY = 1
    BACKGROUND = 2


Encode = Callable[[list[str]], Any]
"""``encode(texts) -> rows``: one engine call (its prefix chosen by the caller)."""

_arrivals = itertools.count()


@dataclass(eq=False)
class _Job:
    texts: list[str]
    tokens: int
    rank: Rank
    order: int = field(default_factory=lambda: next(_arrivals))
    rows: list[list[float]] | None = None
    error: BaseException | None = None
    done: bool = False


class EngineTurns:
    """A query turn and a work turn, one call each; waiting short queries in one call."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._held: set[str] = set()  # the turns a call holds: "query", "work"
        self._waiting: list[_Job] = []
        self._background: concurrent.futures.ThreadPoolExecutor | None = None
        self._pace: float | None = None  # seconds per token of recent query calls
        self._running_query_tokens = 0
        os.register_at_fork(after_in_child=self._forget_background)

    @property
    def waiting(self) -> int:
        """Calls waiting for the engine."""
        with self._cond:
            return len(self._waiting)

    @property
    def queries_waiting(self) -> int:
        """Calls for a reply's query waiting for the engine."""
        with self._cond:
            return sum(job.rank is not Rank.BACKGROUND for job in self._waiting)

    def run(
        self,
        texts: Sequence[str],
        tokens: int,
        rank: Rank,
        encode: Encode,
        *,
        budget: float | None = None,
    ) -> list[list[float]]:
        """Embed ``texts`` when it is their turn; returns one vector per text.

        Args:
            texts: The texts, already cut to the model's length.
            tokens: Their token count.
            rank: What they are for; a :attr:`Rank.QUERY` call may be joined
                by other waiting short queries (each gets its own rows back).
            encode: The engine call for these texts.
            budget: For a :attr:`Rank.QUERY` call, the seconds it may wait and
                take at the engine's recent pace.

        Raises:
            EmbedderBusyError: The query would take longer than ``budget``.
        """
        job = _Job(list(texts), tokens, rank)
        turn = _turn_of(job)
        with self._cond:
            if budget is not None and rank is Rank.QUERY:
                self._admit(tokens, budget)
            self._waiting.append(job)
            while not job.done and (turn in self._held or self._next(turn) is not job):
                self._cond.wait()
            if job.done:  # another short query's call embedded it
                return _result(job)
            batch = self._take(job)
            self._held.add(turn)
            call_tokens = sum(item.tokens for item in batch)
            if turn == "query":
                self._running_query_tokens = call_tokens
        started = time.perf_counter()
        try:
            texts_of_call = [text for item in batch for text in item.texts]
            if job.rank is Rank.BACKGROUND:
                matrix = self._background_pool().submit(encode, texts_of_call).result()
            else:
                matrix = encode(texts_of_call)
            start = 0
            for item in batch:
                item.rows = [row.tolist() for row in matrix[start : start + len(item.texts)]]
                start += len(item.texts)
        except BaseException as exc:
            for item in batch:
                item.error = exc
        finally:
            with self._cond:
                if turn == "query":
                    self._running_query_tokens = 0
                    if job.error is None:
                        self._keep_pace(call_tokens, time.perf_counter() - started)
                for item in batch:
                    item.done = True
                self._held.discard(turn)
                self._cond.notify_all()
        return _result(job)

    def _admit(self, tokens: int, budget: float) -> None:
        """Raise :class:`EmbedderBusyError` if a query of ``tokens`` would take past
        ``budget`` behind the queries ahead of it.

        A query with none ahead is never refused: only the queries let through
        measure the pace, so one slow call (a cold start, a stall) would
        otherwise refuse every later query, on an idle engine too.
        """
        ahead = self._running_query_tokens + sum(
            job.tokens for job in self._waiting if job.rank is Rank.QUERY
        )
        if self._pace is None or ahead == 0:
            return
        expected = (ahead + tokens) * self._pace
        if expected > budget:
            raise EmbedderBusyError(
                f"a query of {tokens} tokens would take ~{expected:.2f} s behind "
                f"{ahead} tokens of queries (budget {budget:.2f} s)"
            )

    def _keep_pace(self, tokens: int, seconds: float) -> None:
        pace = seconds / max(tokens, 1)
        old = self._pace
        self._pace = pace if old is None else old + _PACE_WEIGHT * (pace - old)

    def _background_pool(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._cond:
            if self._background is None:
                self._background = concurrent.futures.ThreadPoolExecutor(
                    max_workers=1,
                    thread_name_prefix="agentscope-mem0-e5-background",
                    initializer=_lower_priority,
                )
            return self._background

    def _forget_background(self) -> None:
        # After fork() the child has none of the parent's threads.
        self._background = None

    def _next(self, turn: str) -> _Job | None:
        mine = [job for job in self._waiting if _turn_of(job) == turn]
        return min(mine, key=lambda job: (job.rank, job.order)) if mine else None

    def _take(self, first: _Job) -> list[_Job]:
        """``first`` and, for a short query, the other waiting ones within the budget."""
        batch = [first]
        self._waiting.remove(first)
        if first.rank is not Rank.QUERY:
            return batch
        used = first.tokens
        for job in sorted(self._waiting, key=lambda job: job.order):
            if job.rank is Rank.QUERY and used + job.tokens <= _QUERY_BATCH_TOKENS:
                batch.append(job)
                self._waiting.remove(job)
                used += job.tokens
        return batch


def _lower_priority() -> None:
    """Lower the calling thread's CPU priority (Linux: niceness is per thread)."""
    try:
        thread = threading.get_native_id()
        current = os.getpriority(os.PRIO_PROCESS, thread)
        os.setpriority(os.PRIO_PROCESS, thread, min(19, current + BACKGROUND_NICENESS))
    except (AttributeError, OSError) as exc:  # not on this platform: same priority
        logger.debug("background embeddings keep the process's priority: %s", exc)


def _turn_of(job: _Job) -> str:
    return "query" if job.rank is Rank.QUERY else "work"


def _result(job: _Job) -> list[list[float]]:
    if job.error is not None:
        raise job.error
    assert job.rows is not None
    return job.rows
