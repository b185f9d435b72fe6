"""The profile's background job: refresh a user's profile after enough new writes.

The write path tells the refresher what it stored (:meth:`ProfileRefresher.written`)
and what the time judgement changed (:meth:`ProfileRefresher.changed`, a
supersede or a merge); after ``every`` new memories of a user, or at once
after a change, the user's profile is distilled again, ``delay`` seconds
later so that a burst of writes makes one refresh. One refresh at a time per
user, in a task nobody waits for: no reply waits on the model. A failed
refresh is logged and tried again ``retry_delay`` seconds later (three tries;
then the next write tries again); a failure never reaches a reply. A reply
that finds no profile asks for one (:meth:`ProfileRefresher.missing`), so a
profile cleared, or emptied by forgetting a memory, comes back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._mem0.call_context import metered, no_reply_waits, record_call
from .._recall.dedupe import dedupe_hits
from .._scope import Scope
from .distil import (
    DEFAULT_PROFILE_LINES,
    DEFAULT_PROFILE_TOKENS,
    PROFILE_SYSTEM,
    Distilled,
    profile_prompt,
    read_profile,
)
from .record import call_store, clear_profile, save_profile

if TYPE_CHECKING:
    from agentscope.model import ChatModelBase

    from .._mem0.backend import Mem0Backend
    from .._observe.usage import CallTokens, TokenMeter
    from .._working.stores import WorkingRecord, WorkingStore

__all__ = [
    "DEFAULT_REFRESH_EVERY",
    "MISSING_RECHECK",
    "ProfileRefresher",
    "Refreshed",
]

logger = logging.getLogger(__name__)

DEFAULT_REFRESH_EVERY = 5
"""New memories of a user after which the profile is refreshed (a supersede
refreshes it at once)."""
DEFAULT_REFRESH_DELAY = 2.0
"""Seconds a refresh waits after its trigger, so a burst of writes makes one."""
DEFAULT_RETRY_DELAY = 60.0
"""Seconds before a failed refresh is tried again."""
MISSING_RECHECK = 600.0
"""Seconds before a reply that finds no profile asks for one again."""
_TRIES = 3
_MEMORIES_READ = 200
"""Current memories read per refresh; the newest :data:`_MEMORIES_SHOWN` go to the model."""
_MEMORIES_SHOWN = 60


@dataclass
class Refreshed:
    """What one refresh did."""

    user_id: str
    memories: int
    """Current memories given to the model."""
    distilled: Distilled
    """The lines kept and dropped."""
    seconds: float
    """Wall time of the refresh, model call included."""
    tokens_in: int = 0
    tokens_out: int = 0
    record: WorkingRecord | None = None
    """What was stored; ``None`` when nothing was (no memories, or an edit won)."""


@dataclass
class _User:
    pending: int = 0
    """New memories since the last refresh."""
    due: bool = False
    """A refresh is wanted (threshold reached or a change)."""
    task: asyncio.Task[None] | None = None
    missing_at: float | None = None
    """When a reply last found no profile (monotonic seconds)."""


class ProfileRefresher:
    """Distils each user's current memories into their profile, in the background.

    Args:
        backend: Where the memories are read.
        model: The chat model that writes the profile (the one mem0 extracts
            with); ``None``: no refreshes (a profile set by hand still shows).
        store: The working-memory store, or a function that finds it on first use.
        every: New memories after which a user's profile is refreshed.
        delay: Seconds a refresh waits after its trigger (debounce).
        retry_delay: Seconds before a failed refresh is tried again.
        timeout: Seconds the model may take per refresh.
        max_tokens: The profile's budget.
        meter: Where the tokens are counted (kind ``profile``).
    """

    def __init__(
        self,
        backend: Mem0Backend,
        model: ChatModelBase | None,
        store: WorkingStore | Callable[[], WorkingStore],
        *,
        every: int = DEFAULT_REFRESH_EVERY,
        delay: float = DEFAULT_REFRESH_DELAY,
        retry_delay: float = DEFAULT_RETRY_DELAY,
        timeout: float | None = 120.0,
        max_tokens: int = DEFAULT_PROFILE_TOKENS,
        meter: TokenMeter | None = None,
    ) -> None:
        self.backend = backend
        self.model = model
        # A store, or the function that finds it on first use (off the constructor:
        # finding it may open a database connection).
        self._store: WorkingStore | None = None if callable(store) else store
        self._find_store = store if callable(store) else None
        self.every = every
        self.delay = delay
        self.retry_delay = retry_delay
        self.timeout = timeout
        self.max_tokens = max_tokens
        self.meter = meter
        self._users: dict[str, _User] = {}
        self._stopped = False
        self._counts = dict.fromkeys(
            ["refreshes", "refresh_failures", "lines_kept", "lines_dropped"], 0
        )

    @property
    def store(self) -> WorkingStore:
        """The working-memory store the profiles are kept in."""
        if self._store is None:
            assert self._find_store is not None
            self._store = self._find_store()
        return self._store

    # -- signals from the write path (return at once) -------------------------

    def written(self, scope: Scope, new: int) -> None:
        """``new`` memories of ``scope``'s user were stored."""
        if new <= 0 or self.model is None or self._stopped:
            return
        user = self._users.setdefault(scope.user_id, _User())
        user.pending += new
        if user.pending >= self.every:
            self._want(scope.user_id, user)

    def changed(self, scope: Scope) -> None:
        """What ``scope``'s reads show changed (a supersede or a merge)."""
        if self.model is None or self._stopped:
            return
        self._want(scope.user_id, self._users.setdefault(scope.user_id, _User()))

    def missing(self, user_id: str) -> None:
        """A reply found no profile of ``user_id`` (never made, cleared, or
        forgotten with a memory): refresh it, at most once per
        :data:`MISSING_RECHECK` seconds."""
        if self.model is None or self._stopped:
            return
        user = self._users.setdefault(user_id, _User())
        now = time.monotonic()
        if user.missing_at is not None and now - user.missing_at < MISSING_RECHECK:
            return
        user.missing_at = now
        self._want(user_id, user)

    def _want(self, user_id: str, user: _User) -> None:
        user.due = True
        if user.task is None or user.task.done():
            user.task = asyncio.ensure_future(self._run(user_id, user))

    async def _run(self, user_id: str, user: _User) -> None:
        """Refresh while one is due, one at a time; retry a failure later."""
        with no_reply_waits():
            await asyncio.sleep(self.delay)
            tries = 0
            while user.due and not self._stopped:
                user.due, user.pending = False, 0
                try:
                    await self.refresh(user_id)
                    tries = 0
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    tries += 1
                    self._counts["refresh_failures"] += 1
                    logger.warning(
                        "the profile of user %s was not refreshed (try %d of %d): %r",
                        user_id,
                        tries,
                        _TRIES,
                        exc,
                    )
                    if tries >= _TRIES:
                        # Left for the next write to try again.
                        user.pending = self.every
                        break
                    user.due = True
                    await asyncio.sleep(self.retry_delay)

    # -- one refresh ------------------------------------------------------------

    async def refresh(self, user_id: str) -> Refreshed:
        """Distil ``user_id``'s current memories into their profile now.

        A user without memories gets an empty profile. An edit made while the
        model was writing wins (nothing is stored).

        Raises:
            Exception: The model or a store failed (nothing changed).
        """
        if self.model is None:
            raise RuntimeError(
                "no chat model to write profiles with: the mem0 client does not extract "
                "with an AgentScope model"
            )
        started = time.perf_counter()
        store = self.store
        before = await call_store(store, _version, user_id)
        hits = await self.backend.get_all(Scope(user_id), limit=_MEMORIES_READ)
        unique = dedupe_hits(hits, user_id=user_id)
        unique.sort(key=lambda hit: hit.date or "", reverse=True)
        shown = unique[:_MEMORIES_SHOWN]
        if not shown:
            record = await call_store(store, clear_profile, user_id)
            return Refreshed(user_id, 0, Distilled(), time.perf_counter() - started, record=record)
        prompt = profile_prompt([hit.memory for hit in shown], max_lines=DEFAULT_PROFILE_LINES)
        system = PROFILE_SYSTEM.format(max_lines=DEFAULT_PROFILE_LINES)
        answer, tokens = await self._ask(system, prompt)
        distilled = read_profile(answer, [hit.memory for hit in shown], max_tokens=self.max_tokens)
        self._counts["refreshes"] += 1
        self._counts["lines_kept"] += len(distilled.lines)
        self._counts["lines_dropped"] += len(distilled.dropped)
        if distilled.dropped:
            logger.info(
                "profile of user %s: %d lines not grounded in the memories were dropped",
                user_id,
                len(distilled.dropped),
            )
        stored = None
        if distilled.lines:
            stored = await call_store(store, _save, user_id, distilled.text, before)
            if stored.content != distilled.text:
                logger.info("profile of user %s was edited meanwhile; the edit is kept", user_id)
                stored = None
        return Refreshed(
            user_id,
            len(shown),
            distilled,
            time.perf_counter() - started,
            tokens_in=tokens[0],
            tokens_out=tokens[1],
            record=stored,
        )

    async def _ask(self, system: str, prompt: str) -> tuple[str, tuple[int, int]]:
        from agentscope.message import SystemMsg, UserMsg

        from .._mem0.adapters import _final_response, flatten_response

        assert self.model is not None
        messages = [SystemMsg(name="system", content=system), UserMsg(name="user", content=prompt)]
        response = await asyncio.wait_for(_final_response(self.model, messages, None), self.timeout)
        if getattr(response, "finished_reason", None) == "interrupted":
            # AgentScope answers a cancelled call with an empty "interrupted" response.
            raise TimeoutError(f"no answer within {self.timeout} s")
        flat = flatten_response(response, with_tools=False)
        text = flat if isinstance(flat, str) else str(flat)
        # The meter may write its totals to a file or a table: off the loop.
        tokens = await asyncio.to_thread(self._count, response.usage, f"{system}\n{prompt}", text)
        return text, (tokens.input_tokens, tokens.output_tokens)

    def _count(self, usage: Any, prompt: str, answer: str) -> CallTokens:
        with metered(self.meter, "profile"):
            return record_call(usage, prompt, answer)

    # -- lifecycle --------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """``profile_refreshes``, ``profile_refresh_failures``,
        ``profile_lines_kept``, ``profile_lines_dropped``, ``profile_waiting``."""
        waiting = sum(1 for u in self._users.values() if u.task is not None and not u.task.done())
        return {**{f"profile_{k}": v for k, v in self._counts.items()}, "profile_waiting": waiting}

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait for the refreshes under way; True when they ended within ``timeout``."""
        running = [u.task for u in self._users.values() if u.task is not None and not u.task.done()]
        if not running:
            return True
        _, not_done = await asyncio.wait(running, timeout=timeout)
        return not not_done

    def stop(self) -> None:
        """Cancel the refreshes under way (at close); the profiles stored stay."""
        self._stopped = True
        for user in self._users.values():
            if user.task is not None:
                user.task.cancel()


def _version(store: WorkingStore, user_id: str) -> int:
    from .record import PROFILE_KEY

    record = store.load(user_id, PROFILE_KEY)
    return record.version if record is not None else 0


def _save(store: WorkingStore, user_id: str, text: str, version: int) -> WorkingRecord:
    return save_profile(store, user_id, text, expected_version=version)
