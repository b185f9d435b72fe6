"""The one door to mem0: every call of a mem0 client goes through
:class:`Mem0Backend`, which scopes it, normalises its answer and turns mem0's
errors into the package's own (:func:`.errors.mapped_errors`).

Building a client is :mod:`.clients`' job; turning a scope into mem0's ids is
:func:`.._scope.mem0_ids`'.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections import Counter
from collections.abc import Awaitable, Coroutine
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any, TypeVar

from .._exceptions import (
    BackendError,
    ConfigurationError,
    PermanentBackendError,
    TransientBackendError,
)
from .._memories.hit import MemoryHit, entries_of, normalise_hits, results_of
from .._memories.lifecycle import read_current, write_metadata
from .._memories.release import Forgotten, Restored, forget, restore
from .._memories.validity import check_as_of, read_around_event, read_as_of, read_in_period
from .._observe.usage import TokenMeter
from .._scope import Scope, is_hosted, mem0_ids
from .._text.grounding import Grounding
from .._text.periods import EventPeriod
from .._vectors.search_terms import mem0_threshold
from .call_context import (
    ExtractionCheck,
    Lane,
    WriteTime,
    caller_loop_scope,
    calling,
    current,
    reply_waits,
)
from .errors import is_not_found, mapped_errors
from .existing import compare_with_current
from .extraction import ExtractionStyle, annotate_results, check_extraction
from .loops import get_lanes
from .user_level import merge_user_level, one_read_filters, user_wide_limit

if TYPE_CHECKING:
    from .._text.periods import Period

__all__ = ["Forgotten", "Mem0Backend", "MemoryHit", "normalise_hits"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_EVENT_CANDIDATES = 3
"""Memories searched for the one that tells of an event a question is timed by."""


class Mem0Backend:
    """Scoped, normalised access to one async mem0 client.

    The only code of the package that calls the client's methods. A failure
    surfaces as :class:`TransientBackendError` (retrying may help) or
    :class:`PermanentBackendError`, raised from mem0's own error.

    Args:
        client: A ``mem0.AsyncMemory`` or ``mem0.AsyncMemoryClient`` (or an
            object of the same shape); see :func:`.clients.resolve_client`.
        extraction: ``"mem0"`` (mem0's own extraction prompt) or
            ``"compact"`` (:mod:`.extraction`; needs a client that extracts
            through an AgentScope chat model).

    Raises:
        ConfigurationError: An unknown ``extraction``, or ``"compact"`` on a
            client whose extraction does not go through an AgentScope model.
    """

    def __init__(self, client: Any, *, extraction: ExtractionStyle = "mem0") -> None:
        self.client = client
        self.hosted = is_hosted(client)
        self.extraction: ExtractionStyle = check_extraction(extraction)
        if extraction == "compact" and not _extracts_with_agentscope(client):
            raise ConfigurationError(
                "extraction=\"compact\" replaces mem0's prompt inside this package's adapter, "
                "but this mem0 client extracts with "
                + ("the hosted platform" if self.hosted else "another LLM provider")
                + '; build it from an AgentScope chat_model, or keep extraction="mem0"'
            )
        self.meter: TokenMeter | None = None
        """Counts the model tokens of each write's extraction, when set."""
        self.grounded = False
        """Check what the extraction proposes against the user's words
        (:mod:`.._text.grounding`); a middleware's client state turns it on
        (``Parameters(grounded=True)``, the default)."""
        self.remember = ""
        """The user's rules for what to keep (``Parameters(remember=...)``)."""
        self.ignore = ""
        """... and for what never to keep (``Parameters(ignore=...)``)."""
        self.extraction_counts: Counter[str] = Counter()
        """What the checks of extractions did: ``memories_dropped_<reason>``,
        ``memories_kept_grounded``, ``grounding_model_checks``."""
        # mem0's own AsyncMemory blocks worker threads on model calls: it runs
        # on this package's lanes, off the agent loop's executor (see .loops).
        self._on_lanes = _is_oss_memory(client)
        compare_with_current(client)  # mem0's add: superseded memories are not "known"

    def read_filters(self, scope: Scope) -> dict[str, Any]:
        """The filters that read ``scope``'s memories from this client in one call.

        With ``scope.with_user_level`` on a store whose filters cannot say "no
        agent" (see :mod:`.user_level`), the agent's memories only: the readers
        below read by user instead.
        """
        ids = mem0_ids(scope, hosted=self.hosted, reading=True)
        if scope.with_user_level and "agent_id" in ids:
            return one_read_filters(self.client, ids["user_id"], ids["agent_id"]) or ids
        return ids

    def _reads_user_wide(self, scope: Scope) -> bool:
        """Whether ``scope`` is read by user and filtered here (:mod:`.user_level`)."""
        return (
            scope.with_user_level
            and scope.agent_id is not None
            # mem0's own AsyncMemory, whose entries carry their agent_id; other
            # clients get the agent's filter, so an entry without it leaks nothing.
            and self._on_lanes
            and one_read_filters(self.client, scope.user_id, scope.agent_id) is None
        )

    # -- reads ----------------------------------------------------------------

    async def search(
        self,
        query: str,
        scope: Scope,
        *,
        top_k: int,
        threshold: float | None = None,
        include_superseded: bool = False,
        period: Period | EventPeriod | None = None,
        as_of: datetime | date | str | None = None,
    ) -> list[MemoryHit]:
        """The memories of ``scope`` most related to ``query``, best first.

        Memories a newer one superseded are left out unless ``include_superseded``.

        Args:
            query: What to search for.
            scope: Whose memories.
            top_k: Memories returned at most.
            threshold: Minimum search score; ``None`` leaves it to mem0.
            include_superseded: Also memories a newer one superseded.
            period: The time the question names (:func:`~.._text.periods.time_in`):
                its memories come first, superseded ones that held then
                included; a time told by an event ("before I moved") costs a
                second search, for the event's memory.
            as_of: Only what was current then (a datetime, a date, meaning its
                end, or ISO 8601 text): said by then and not yet superseded.

        Raises:
            ConfigurationError: ``as_of`` is not a time.
        """
        moment = None if as_of is None else check_as_of(as_of)

        async def fetch(n: int) -> list[MemoryHit]:
            return normalise_hits(await self.search_raw(query, scope, top_k=n, threshold=threshold))

        if moment is not None:
            return await read_as_of(fetch, top_k, moment)
        if isinstance(period, EventPeriod):

            async def find(event: str) -> list[MemoryHit]:
                # The event's own memory, superseded or not ("User lives in Austin").
                found = await self.search_raw(
                    event, scope, top_k=_EVENT_CANDIDATES, threshold=threshold
                )
                return normalise_hits(found)

            return await read_around_event(
                fetch, find, top_k, period, include_superseded=include_superseded
            )
        if period is not None:
            return await read_in_period(fetch, top_k, period, include_superseded=include_superseded)
        return await read_current(fetch, top_k, include_superseded=include_superseded)

    def start_read(
        self, read: Coroutine[Any, Any, T]
    ) -> Awaitable[T] | concurrent.futures.Future[T]:
        """``read`` (a coroutine of this backend's reads, e.g. :meth:`search`)
        started whole on a reader thread of mem0's read lane
        (:meth:`~.loops.Mem0Lanes.start`), for :func:`~.bounded.bounded`.

        Its own steps (normalising, dropping superseded memories, reading on)
        then leave the caller's loop as mem0's do, and the caller resumes once,
        on the answer: on a busy loop each resumption is a wait behind every
        other reply. A client without lanes, or a read no reply waits for,
        gets ``read`` back as it is.
        """
        if not self._on_lanes or current().serves_no_reply:
            return read
        return get_lanes().start(read)

    async def search_raw(
        self,
        query: str,
        scope: Scope,
        *,
        top_k: int,
        threshold: float | None = None,
    ) -> list[Any]:
        """Like :meth:`search`, but mem0's result entries as they came.

        ``threshold`` is the least cosine similarity of a hit on every store
        (see :mod:`.._vectors.search_terms`); ``None`` leaves mem0's default.
        """
        with mem0_threshold(self.client, threshold) as gate:
            gated = {} if gate is None else {"threshold": gate}
            return await self._read("search", scope, query, top_k=top_k, **gated)

    async def get_all(
        self, scope: Scope, *, limit: int, include_superseded: bool = False
    ) -> list[MemoryHit]:
        """Up to ``limit`` memories of ``scope``, in mem0's order.

        Memories a newer one superseded are left out unless ``include_superseded``.
        """

        async def fetch(n: int) -> list[MemoryHit]:
            return normalise_hits(await self._read("get_all", scope, top_k=n))

        return await read_current(fetch, limit, include_superseded=include_superseded)

    async def _read(
        self, name: str, scope: Scope, *args: Any, top_k: int, **kwargs: Any
    ) -> list[Any]:
        """mem0's entries for one read of ``scope``: one call, or on a store whose
        filters cannot say "no agent" one call by user, filtered (:mod:`.user_level`)."""

        async def read(filters: dict[str, Any], n: int) -> list[Any]:
            return results_of(await self._call(name, *args, filters=filters, top_k=n, **kwargs))

        if not self._reads_user_wide(scope):
            return await read(self.read_filters(scope), top_k)
        by_score = name == "search"
        wide_limit = user_wide_limit(top_k)
        wide = await read({"user_id": scope.user_id}, wide_limit)
        agents = [e for e in wide if isinstance(e, dict) and e.get("agent_id") == scope.agent_id]
        found = merge_user_level(agents, wide, top_k, by_score=by_score)
        if len(found) < top_k and len(wide) >= wide_limit:
            # Other agents' memories filled the read: the agent's own read fills in.
            agents = await read(self.read_filters(scope), top_k)
            found = merge_user_level(agents, wide, top_k, by_score=by_score)
        return found

    async def get_all_raw(
        self,
        scope: Scope,
        *,
        limit: int,
        where: dict[str, Any] | None = None,
    ) -> list[dict[str, Any]]:
        """Up to ``limit`` of mem0's entries for ``scope``, as they came.

        Args:
            scope: Whose memories.
            limit: Entries at most.
            where: More filter conditions (metadata fields) for mem0.
        """
        filters = {**self.read_filters(scope), **(where or {})}
        return entries_of(await self._call("get_all", filters=filters, top_k=limit))

    async def get_page(self, scope: Scope, *, page: int, page_size: int) -> tuple[list[Any], bool]:
        """One page of the hosted platform's listing of ``scope``.

        Returns:
            The page's entries and whether another page follows.
        """
        raw = await self._call(
            "get_all", filters=self.read_filters(scope), page=page, page_size=page_size
        )
        return entries_of(raw), bool(isinstance(raw, dict) and raw.get("next"))

    async def get(self, memory_id: str) -> dict[str, Any] | None:
        """One memory by id as mem0 returned it, or ``None`` when there is none."""
        try:
            raw = await self._call("get", memory_id)
        except BackendError as exc:
            if is_not_found(exc):
                return None
            raise
        return raw if isinstance(raw, dict) and raw else None

    async def history(self, memory_id: str) -> list[dict[str, Any]]:
        """mem0's change history of one memory, oldest first."""
        raw = await self._call("history", memory_id)
        return [entry for entry in raw or [] if isinstance(entry, dict)]

    # -- writes ---------------------------------------------------------------

    async def add(
        self,
        messages: list[dict[str, str]],
        scope: Scope,
        *,
        infer: bool = True,
        metadata: dict[str, Any] | None = None,
        said_at: datetime | None = None,
    ) -> list[dict[str, Any]]:
        """Store ``messages`` in ``scope``; returns mem0's result entries.

        ``said_at`` (aware; default now) is when they were said: stored as
        the memories' ``said_at``/``valid_from`` and given to the extraction
        as its date.
        """
        when = said_at if said_at is not None else datetime.now(UTC)
        kwargs: dict[str, Any] = mem0_ids(scope, hosted=self.hosted)
        if not infer:
            kwargs["infer"] = False
        kwargs["metadata"] = {**write_metadata(when, hosted=self.hosted), **(metadata or {})}
        said = WriteTime(when)
        meter = (self.meter, "extraction") if self.meter is not None else None
        check = self._check_of(messages) if infer else None
        if check is not None and check.guidance and not self.hosted and self.extraction == "mem0":
            # mem0's own prompt takes the user's rules as its custom instructions.
            own = getattr(self.client, "custom_instructions", None)
            kwargs["prompt"] = "\n".join(filter(None, [own, check.guidance]))
        with calling(said=said, extraction=self.extraction, meter=meter, check=check):
            results = entries_of(await self._call("add", messages, **kwargs))
        if check is not None:
            self._count(check)
        if infer and self.meter is not None:
            # A write is an exchange (one user message); a backlog's are sent in one call.
            exchanges = sum(m.get("role") == "user" for m in messages)
            self.meter.add("extraction", writes=max(exchanges, 1))
        annotate_results(results, said)
        return results

    def _check_of(self, messages: list[dict[str, str]]) -> ExtractionCheck:
        """What one write's extraction is checked against."""

        def side(role: str) -> str:
            return "\n".join(str(m.get("content") or "") for m in messages if m.get("role") == role)

        grounding = Grounding(side("user"), side("assistant")) if self.grounded else None
        return ExtractionCheck(grounding, remember=self.remember, ignore=self.ignore)

    def _count(self, check: ExtractionCheck) -> None:
        counts = self.extraction_counts
        for reason, n in check.dropped.items():
            counts[f"memories_dropped_{reason}"] += n
        counts["memories_kept_grounded"] += check.kept
        counts["grounding_model_checks"] += check.asked

    async def update_metadata(self, memory_id: str, changes: dict[str, Any]) -> bool:
        """Set metadata fields of one memory, leaving its text, vector and dates alone.

        A ``None`` value clears a field. mem0's own ``update`` would re-embed
        the text and move ``updated_at`` (mem0 2.2), so the OSS client's vector
        store is updated directly; the hosted platform gets ``update(metadata=)``
        with the memory's whole metadata, the changes applied (whether the
        platform merges or replaces metadata, the other fields stay).

        Returns:
            False when the memory is gone.
        """
        if self.hosted:
            entry = await self.get(memory_id)
            if entry is None:
                return False
            current = entry.get("metadata")
            metadata = {**(current if isinstance(current, dict) else {}), **changes}
            await self._call("update", memory_id, metadata=metadata)
            return True
        store = getattr(self.client, "vector_store", None)
        if store is None:
            raise PermanentBackendError(f"{type(self.client).__name__} has no vector_store")
        with caller_loop_scope(), mapped_errors("metadata update"):
            return await asyncio.to_thread(_merge_payload, store, memory_id, changes)

    async def embed(self, texts: list[str]) -> list[list[float]] | None:
        """Embed ``texts`` with the client's own embedder, as it embeds search queries.

        A reply waits for them (a background caller says otherwise with
        ``no_reply_waits``): a busy offline embedder may refuse them.

        Search embeddings go through the query cache (:mod:`.query_cache`), so
        a memory text embedded once is at hand for the next comparison.

        Returns:
            One vector per text, or ``None`` when this client has no embedder
            here (hosted mem0) or the embedder refused a text.
        """
        model = getattr(self.client, "embedding_model", None)
        if self.hosted or model is None or not texts:
            return None

        def run() -> list[list[float]]:
            return [[float(x) for x in model.embed(text, "search")] for text in texts]

        with caller_loop_scope(), reply_waits(), mapped_errors("embedding"):
            vectors = await asyncio.to_thread(run)
        # A text the embedder refused (busy, keywords_only) has no vector: none for the lot.
        return vectors if all(vectors) else None

    async def delete(self, memory_id: str) -> bool:
        """Forget one memory; ``False`` when it was gone already (see :meth:`forget`)."""
        return (await self.forget(memory_id)).deleted

    async def forget(self, memory_id: str) -> Forgotten:
        """Delete one memory and its repeats, bringing back what it hid.

        The memories it superseded become current again unless a newer memory
        says otherwise (see :mod:`.._memories.release`).
        """
        return await forget(self, memory_id)

    async def restore(self, memory_id: str) -> Restored | None:
        """Make a memory the judgement superseded or merged current again ("not a
        change"); ``None`` when it is gone or was current (see
        :func:`~.._memories.release.restore`)."""
        return await restore(self, memory_id)

    async def delete_only(self, memory_id: str) -> bool:
        """Delete one memory and nothing else (what it hid stays hidden; use
        :meth:`forget`); ``False`` when it was gone already."""
        try:
            await self._call("delete", memory_id)
        except PermanentBackendError as exc:
            if is_not_found(exc):
                return False
            raise
        return True

    async def delete_all(self, scope: Scope) -> None:
        """Delete every memory of ``scope``."""
        await self._call("delete_all", **mem0_ids(scope, hosted=self.hosted))

    async def delete_batch(
        self,
        scope: Scope,
        field: str,
        key: str,
        *,
        timeout: float | None = None,
        rounds: int = 10,
    ) -> int:
        """Delete the memories of ``scope`` whose metadata ``field`` is ``key``.

        Only entries that carry the key are deleted, so a store that ignores
        the metadata filter loses nothing else. The writer undoes a write that
        was interrupted mid-call with it.

        Args:
            scope: Whose memories.
            field: The metadata field.
            key: Its value.
            timeout: Seconds each mem0 call may take.
            rounds: Listings at most (each deletes what it found).

        Returns:
            How many memories were deleted.

        Raises:
            PermanentBackendError: This client cannot list or delete by metadata.
            TransientBackendError: mem0 failed or was late; or memories under
                the key kept coming back for ``rounds`` listings.
        """
        if not callable(getattr(self.client, "get_all", None)) or not callable(
            getattr(self.client, "delete", None)
        ):
            raise PermanentBackendError(f"{type(self.client).__name__} has no get_all/delete")
        removed = 0
        for _ in range(rounds):
            listed = await _within(timeout, self.get_all_raw(scope, limit=100, where={field: key}))
            mine = [entry["id"] for entry in listed if _carries(entry, field, key)]
            if not mine:
                return removed
            for memory_id in mine:
                await _within(timeout, self.delete(memory_id))
                removed += 1
        raise TransientBackendError(f"memories under {field}={key} keep coming back")

    # -- the door ---------------------------------------------------------------

    async def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """Call the client's method ``name``; mem0's errors become ours."""
        method = getattr(self.client, name, None)
        if method is None:
            raise PermanentBackendError(f"{type(self.client).__name__} has no {name}()")
        with caller_loop_scope(), mapped_errors(name):
            if self._on_lanes:
                lane: Lane = "read" if name in _READS and not current().serves_no_reply else "write"
                return await get_lanes().run(method(*args, **kwargs), lane=lane)
            return await method(*args, **kwargs)


_READS = frozenset({"search", "get_all", "get", "history"})


def _extracts_with_agentscope(client: Any) -> bool:
    from .adapters import AgentScopeLLM

    return isinstance(getattr(client, "llm", None), AgentScopeLLM)


def _is_oss_memory(client: Any) -> bool:
    try:
        from mem0 import AsyncMemory
    except ImportError:  # pragma: no cover - mem0 is a dependency
        return False
    return isinstance(client, AsyncMemory)


async def _within(timeout: float | None, call: Awaitable[Any]) -> Any:
    try:
        return await asyncio.wait_for(call, timeout)
    except TimeoutError as exc:
        raise TransientBackendError(f"mem0 took over {timeout} s") from exc


def _carries(entry: Any, field: str, key: str) -> bool:
    if not isinstance(entry, dict) or not entry.get("id"):
        return False
    metadata = entry.get("metadata") or {}
    return entry.get(field) == key or (isinstance(metadata, dict) and metadata.get(field) == key)


def _merge_payload(store: Any, memory_id: str, changes: dict[str, Any]) -> bool:
    """In a worker thread: read one point's payload and write it back with
    ``changes`` (one hop of the loop for both); False when the point is gone."""
    point = store.get(vector_id=memory_id)
    if point is None or not isinstance(getattr(point, "payload", None), dict):
        return False
    store.update(vector_id=memory_id, payload={**point.payload, **changes})
    return True
