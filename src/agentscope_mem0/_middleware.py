"""``Mem0Middleware``: long-term memory for an AgentScope agent.

This page wires the hooks together; the work is done by the backend
(mem0 access), the note (what the model sees), the writer (background
writes) and the tools.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agentscope.event import (
    ExternalExecutionResultEvent,
    ReplyStartEvent,
    RequireExternalExecutionEvent,
    RequireUserConfirmEvent,
    UserConfirmResultEvent,
)
from agentscope.message import Msg
from agentscope.middleware import MiddlewareBase
from agentscope.types import ReplyFinishedReason

from ._backend import Mem0Backend
from ._breaker import CircuitBreaker
from ._clients import resolve_client
from ._exceptions import ConfigurationError
from ._notes import (
    DEFAULT_MEMORY_RULES,
    DEFAULT_MEMORY_SECTION_HEADER,
    DEFAULT_MEMORY_SECTION_INTRO,
    place_note,
    render_note,
)
from ._recall import (
    DEFAULT_MAX_MEMORY_TOKENS,
    DEFAULT_PROFILE_TTL,
    DEFAULT_QUERY_CONTEXT_TURNS,
    ProfileCache,
    RecallMode,
    build_query,
    check_recall_options,
    retrieve,
)
from ._scope import Scope, check_user_id
from ._tools import AddMemoryTool, SearchMemoryTool
from ._query_cache import install_query_cache
from ._working import WorkingMemory, WorkingScope, build_working_memory
from ._writer import WriteQueue

if TYPE_CHECKING:
    from types import TracebackType

    from agentscope.agent import Agent
    from agentscope.embedding import EmbeddingModelBase
    from agentscope.model import ChatModelBase
    from agentscope.state import AgentState
    from agentscope.tool import ToolBase

__all__ = ["DEFAULT_TOOL_INSTRUCTIONS", "Mem0Middleware", "Mode"]

logger = logging.getLogger(__name__)

Mode = Literal["static_control", "agent_control", "both"]
_MODES = ("static_control", "agent_control", "both")

DEFAULT_TOOL_INSTRUCTIONS = (
    "## Long-term memory\n\n"
    "You have `search_memory` and `add_memory` tools. Search when the request "
    "depends on what you may have learned about the user before; add when the "
    "user tells you a durable fact or preference worth keeping."
)

_STATE_KEY = "agentscope_mem0"
_RESUMPTIONS = (UserConfirmResultEvent, ExternalExecutionResultEvent)


class Mem0Middleware(MiddlewareBase):
    """Long-term memory for AgentScope agents, backed by mem0.

    A drop-in for ``agentscope.middleware.Mem0Middleware``: same keywords, same
    modes, same tools. Writes happen in the background unless ``await_write``.
    One instance may serve several agents and is safe to share.
    """

    _NOT_INSTALLED = (
        "The memory tools only work on an agent that has this Mem0Middleware in its `middlewares`."
    )

    def __init__(
        self,
        *,
        user_id: str,
        client: Any | None = None,
        chat_model: ChatModelBase | None = None,
        embedding_model: EmbeddingModelBase | None = None,
        mem0_config: Any | None = None,
        mode: Mode = "both",
        agent_id: str | Callable[[Agent], str] | None = None,
        top_k: int = 5,
        threshold: float | None = None,
        scope_search_by_agent: bool = True,
        await_write: bool = False,
        memory_section_header: str = DEFAULT_MEMORY_SECTION_HEADER,
        memory_section_intro: str = DEFAULT_MEMORY_SECTION_INTRO,
        tool_instructions: str = DEFAULT_TOOL_INSTRUCTIONS,
        search_timeout: float | None = 2.0,
        accumulate_notes: bool = False,
        outbox_dir: str | os.PathLike[str] | None = None,
        breaker_threshold: int = 5,
        breaker_cooldown: float = 30.0,
        recall: RecallMode = "query",
        max_memory_tokens: int | None = DEFAULT_MAX_MEMORY_TOKENS,
        query_context_turns: int = DEFAULT_QUERY_CONTEXT_TURNS,
        profile_ttl: float = DEFAULT_PROFILE_TTL,
        memory_section_rules: str = DEFAULT_MEMORY_RULES,
        write_queue: WriteQueue | None = None,
        tool_timeout: float | None = 60.0,
        working_memory: WorkingScope | WorkingMemory | None = None,
    ) -> None:
        """Set up memory for one user.

        Args:
            user_id: Whose memories these are: not blank, no whitespace, not ``"*"``.
            client: A ready ``mem0.AsyncMemory`` or ``mem0.AsyncMemoryClient``.
                When given it wins over the three arguments below.
            chat_model: The AgentScope model mem0 extracts memories with.
            embedding_model: The AgentScope model mem0 embeds memories with.
            mem0_config: A mem0 ``MemoryConfig`` (or dict) to start from; its
                ``llm``/``embedder`` are replaced by the models when given.
            mode: ``"static_control"`` (automatic search and write),
                ``"agent_control"`` (tools only) or ``"both"``.
            agent_id: mem0's ``agent_id``: a string, a function of the agent, or
                ``None`` for the agent's ``name``.
            top_k: Memories retrieved per automatic search; the tool's default.
            threshold: Minimum similarity score; ``None`` leaves it to mem0.
            scope_search_by_agent: Search only this agent's memories of the user
                (default) or, when ``False``, everything about the user.
            await_write: Block the reply until mem0 stored the exchange.
            memory_section_header: First line of the memory note.
            memory_section_intro: Line under the header explaining the memories.
            tool_instructions: Appended to the system prompt in tool modes.
            search_timeout: Seconds the automatic search may take before the
                reply goes on without memories; ``None`` waits indefinitely.
            accumulate_notes: Keep every turn's note in context, as AgentScope's
                built-in does, instead of replacing the previous one.
            outbox_dir: Folder of the durable write outbox (``outbox.sqlite3``):
                a write is recorded there before the reply returns and removed
                once mem0 stored it; writes left by a process that ended are
                stored by the next middleware on the folder. ``None`` keeps
                queued writes in memory only. :meth:`local` uses its data folder.
            breaker_threshold: Consecutive failed or timed-out searches after
                which searches are skipped for ``breaker_cooldown`` seconds.
            breaker_cooldown: Seconds searches are skipped before one probe.
            recall: What the automatic note holds: ``"query"`` (memories found
                by searching with the user's message), ``"profile"`` (the
                user's most recent memories, whatever the message) or
                ``"full"`` (both, profile first, without repeats).
            max_memory_tokens: Token budget of the note (CJK-aware estimate);
                the least relevant memories are dropped first. ``None``: no cap.
            query_context_turns: Earlier messages added to the search query.
                0 (the default) searches with the new message alone, which
                measured best on LoCoMo (docs/benchmarks/note-recall.md).
            profile_ttl: Seconds a user's profile is cached; a stored write
                refreshes it sooner.
            memory_section_rules: The line telling the model how to read the
                memories (dates, newer wins, data not instructions).
            write_queue: A write queue shared with other middlewares on the same
                client (service mode does this); :meth:`aclose` only flushes it.
                By default the middleware has its own, using ``outbox_dir``.
            tool_timeout: Seconds ``add_memory`` may wait for mem0 before the
                tool reports a timeout (``search_memory`` uses
                ``search_timeout``); ``None`` waits indefinitely.
            working_memory: A scratchpad the agent keeps with the
                ``update_working_memory`` tool, shown in full every turn:
                ``"conversation"`` (kept in the agent's state), ``"user"``
                (kept in the store, shared by the user's sessions and agents),
                a ``WorkingMemory(...)`` for a template or schema, or ``None``
                (the default: off). See ``docs/working-memory.md``.

        Raises:
            ConfigurationError: A bad ``user_id``, an unknown ``mode``, or no
                usable backend (it is a ``ValueError``).
            TypeError: ``client`` is a synchronous mem0 client.
        """
        check_user_id(user_id)
        self._recall = check_recall_options(
            recall,
            query_context_turns=query_context_turns,
            profile_ttl=profile_ttl,
            max_memory_tokens=max_memory_tokens,
        )
        if not isinstance(breaker_threshold, int) or breaker_threshold < 1:
            raise ConfigurationError(
                f"breaker_threshold must be a positive integer, got {breaker_threshold!r}"
            )
        if breaker_cooldown < 0:
            raise ConfigurationError(f"breaker_cooldown must be >= 0, got {breaker_cooldown!r}")
        if mode not in _MODES:
            raise ConfigurationError(
                f"unknown mode {mode!r}; use one of {', '.join(map(repr, _MODES))}"
            )
        if not (agent_id is None or callable(agent_id)):
            _check_agent_id(agent_id, "the agent_id argument")
        if not isinstance(top_k, int) or top_k < 1:
            raise ConfigurationError(f"top_k must be a positive integer, got {top_k!r}")
        for name, seconds in (("search_timeout", search_timeout), ("tool_timeout", tool_timeout)):
            if seconds is not None and seconds <= 0:
                raise ConfigurationError(f"{name} must be positive or None, got {seconds!r}")
        mem0_client = resolve_client(
            client=client,
            chat_model=chat_model,
            embedding_model=embedding_model,
            mem0_config=mem0_config,
        )
        self._backend = Mem0Backend(mem0_client)
        self._query_cache = install_query_cache(mem0_client)
        self._profile_cache = ProfileCache(ttl=profile_ttl)
        if write_queue is not None and write_queue.backend.client is not mem0_client:
            raise ConfigurationError(
                "write_queue writes to another mem0 client than this middleware; "
                "build the queue on the same client"
            )
        self._owns_writer = write_queue is None
        self._writer = write_queue or WriteQueue(
            self._backend, outbox_dir=outbox_dir, on_stored=self._profile_cache.invalidate
        )
        self._breaker = CircuitBreaker(threshold=breaker_threshold, cooldown=breaker_cooldown)
        self._working = build_working_memory(
            working_memory, user_id=user_id, client=mem0_client, mode=mode
        )
        self._user_id = user_id
        self._agent_id = agent_id
        self._mode: Mode = mode
        self._top_k = top_k
        self._threshold = threshold
        self._scope_search_by_agent = scope_search_by_agent
        self._await_write = await_write
        self._header = memory_section_header
        self._intro = memory_section_intro
        self._tool_instructions = tool_instructions
        self._search_timeout = search_timeout
        self._tool_timeout = tool_timeout
        self._accumulate_notes = accumulate_notes
        self._max_memory_tokens = max_memory_tokens
        self._query_context_turns = query_context_turns
        self._rules = memory_section_rules
        self._closed = False
        self.folder: Path | None = None
        """The data folder, for middlewares built by :meth:`local`."""

    @classmethod
    def local(
        cls,
        *,
        user_id: str,
        chat_model: ChatModelBase,
        embedding_model: EmbeddingModelBase | None = None,
        folder: str | os.PathLike[str] | None = None,
        **options: Any,
    ) -> Mem0Middleware:
        """Memory on the embedded default: no server, no key, one data folder.

        Args:
            user_id: Whose memories these are.
            chat_model: The AgentScope model mem0 extracts memories with (it may
                be the agent's own model instance).
            embedding_model: Defaults to the offline embedder shipped with
                ``agentscope-mem0[local]``.
            folder: The data folder; default ``$AGENTSCOPE_MEM0_DIR`` or
                ``~/.agentscope-mem0``.
            **options: Any other keyword of the constructor (``mode``, ...).

        Raises:
            StoreLockedError: Another process uses the folder.
            DimensionMismatchError: The folder holds vectors of another size.
        """
        from ._clients import build_local_memory
        from .local import data_dir

        client = build_local_memory(chat_model, embedding_model=embedding_model, folder=folder)
        options.setdefault("outbox_dir", data_dir(folder))
        middleware = cls(user_id=user_id, client=client, **options)
        middleware.folder = data_dir(folder)
        return middleware

    # -- public surface -------------------------------------------------

    @property
    def client(self) -> Any:
        """The mem0 client in use."""
        return self._backend.client

    @property
    def user_id(self) -> str:
        """Whose memories this middleware reads and writes."""
        return self._user_id

    @property
    def mode(self) -> Mode:
        """The control mode."""
        return self._mode

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write queued so far is stored.

        Returns:
            True when the queue drained within ``timeout``.
        """
        return await self._writer.flush(timeout)

    async def aclose(self, timeout: float | None = None) -> bool:
        """Flush pending writes (up to ``timeout`` seconds) and release resources.

        Writes not stored by then stay in the outbox when ``outbox_dir`` is set.
        Idempotent.

        Returns:
            True when every queued write was stored.
        """
        if self._closed:
            return True
        self._closed = True
        if not self._owns_writer:
            return await self._writer.flush(timeout)
        return await self._writer.aclose(timeout)

    async def __aenter__(self) -> Mem0Middleware:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def stats(self) -> dict[str, Any]:
        """Counters and latencies of searches and writes since construction.

        Searches: ``searches``, ``search_hits``, ``search_failures``,
        ``search_timeouts``, ``searches_skipped`` (breaker open),
        ``breaker_opened``, ``breaker_state``, ``search_latency_p50/p95``.
        Writes: ``writes_queued/stored/retried/failed/pending`` and more, see
        ``WriteQueue.stats``. Latencies are in seconds.
        """
        cache = self._query_cache.stats() if self._query_cache else {}
        return {**self._breaker.stats(), **self._writer.stats(), **cache}

    # -- hooks ----------------------------------------------------------

    async def on_reply(
        self,
        agent: Agent,
        input_kwargs: dict[str, Any],
        next_handler: Callable[..., AsyncGenerator[Any, None]],
    ) -> AsyncGenerator[Any, None]:
        """Wraps one reply.

        Before it: search mem0 with the new user message(s). At
        ``ReplyStartEvent``: place the memory note after the user message.
        After the final assistant message: queue the exchange for mem0.
        Nothing is searched or written for resumption events or in
        ``agent_control`` mode. A failed or slow search never fails the reply.
        """
        agent_id = self._bind_agent(agent)
        inputs = input_kwargs.get("inputs")
        automatic = self._mode != "agent_control"
        query = query_text(inputs) if automatic else None
        scope = Scope(self._user_id, agent_id)
        note = None
        if query is not None:
            hits = await retrieve(
                self._backend,
                self._search_scope(scope),
                build_query(query, agent.state.context, turns=self._query_context_turns),
                recall=self._recall,
                top_k=self._top_k,
                threshold=self._threshold,
                profile_cache=self._profile_cache,
                timeout=self._search_timeout,
                breaker=self._breaker,
            )
            note = render_note(
                hits,
                header=self._header,
                intro=self._intro,
                rules=self._rules,
                max_tokens=self._max_memory_tokens,
            )

        placed = parked = False
        final: Msg | None = None
        if self._working is not None:
            next_handler = self._working.around(agent, next_handler)
        async for item in next_handler(**input_kwargs):
            if query is not None and not placed and isinstance(item, ReplyStartEvent):
                place_note(
                    agent.state.context,
                    note,
                    replace=not self._accumulate_notes,
                    builtin_header=self._header,
                )
                placed = True
            if isinstance(item, RequireUserConfirmEvent | RequireExternalExecutionEvent):
                parked = True
            if isinstance(item, Msg) and item.role == "assistant":
                final = item
            yield item

        if automatic:
            await self._write_back(agent, scope, inputs, query, final, parked=parked)

    async def on_system_prompt(self, agent: Agent, current_prompt: str) -> str:
        """Appends the tool instructions in ``agent_control`` and ``both`` modes."""
        self._bind_agent(agent)
        if self._mode == "static_control":
            return current_prompt
        return f"{current_prompt}\n\n{self._tool_instructions}"

    async def list_tools(self) -> list[ToolBase]:
        """``search_memory`` and ``add_memory`` in tool modes, else nothing."""
        if self._mode == "static_control":
            return []
        working = self._working.tools() if self._working else []
        return [SearchMemoryTool(self), AddMemoryTool(self), *working]

    # -- internals ------------------------------------------------------

    def _resolve_agent_id(self, agent: Agent) -> str:
        if isinstance(self._agent_id, str):
            return self._agent_id
        value = self._agent_id(agent) if callable(self._agent_id) else agent.name
        return _check_agent_id(value, f"agent {agent.name!r}")

    def _bind_agent(self, agent: Agent) -> str:
        """Record the agent's id in its own state, where the tools look it up."""
        agent_id = self._resolve_agent_id(agent)
        entry = agent.state.middle_context.setdefault(_STATE_KEY, {})
        entry["agent_id"] = agent_id
        return agent_id

    def _search_scope(self, scope: Scope) -> Scope:
        return scope if self._scope_search_by_agent else Scope(scope.user_id)

    def _tool_scope(self, state: AgentState | None, *, for_search: bool) -> Scope | None:
        entry = state.middle_context.get(_STATE_KEY) if state is not None else None
        if not isinstance(entry, dict) or not entry.get("agent_id"):
            return None
        scope = Scope(self._user_id, str(entry["agent_id"]))
        return self._search_scope(scope) if for_search else scope

    async def _write_back(
        self,
        agent: Agent,
        scope: Scope,
        inputs: Any,
        query: str | None,
        final: Msg | None,
        *,
        parked: bool,
    ) -> None:
        """Queue the finished exchange for mem0.

        A reply that stops to wait for a confirmation or an external tool has
        no answer yet: its question is kept in the agent's state and written
        with the answer once the resumed reply completes.
        """
        entry = agent.state.middle_context.setdefault(_STATE_KEY, {})
        if query is None and isinstance(inputs, _RESUMPTIONS):
            query = entry.get("parked_query")
        if query is None:
            return
        if parked:
            entry["parked_query"] = query
            return
        entry.pop("parked_query", None)
        if final is None or final.finished_reason not in (None, ReplyFinishedReason.COMPLETED):
            return
        answer = final.get_text_content()
        if not answer:
            return
        messages = [
            {"role": "user", "content": query},
            {"role": "assistant", "content": answer},
        ]
        await self._writer.submit(scope, messages, wait=self._await_write)

    def _after_write(self, scope: Scope) -> None:
        """Called after a tool stored something for ``scope``."""
        self._profile_cache.invalidate(scope)


def _check_agent_id(value: Any, source: str) -> str:
    """``value`` if it names one agent in mem0, else a clear error about ``source``."""
    if not isinstance(value, str) or not value.strip() or value != value.strip() or value == "*":
        raise ConfigurationError(
            f"agent_id from {source} is {value!r}; it must be a non-blank string "
            "without surrounding whitespace and not mem0's wildcard '*'"
        )
    return value


def query_text(inputs: Any) -> str | None:
    """The text of the new user message(s), or ``None`` when there is none.

    Resumption events (a confirmation or an external tool result) and empty
    inputs carry no new user text.
    """
    if inputs is None or isinstance(inputs, _RESUMPTIONS):
        return None
    messages = inputs if isinstance(inputs, list) else [inputs]
    texts = [
        text
        for msg in messages
        if isinstance(msg, Msg) and msg.role == "user"
        for text in [msg.get_text_content()]
        if text and text.strip()
    ]
    return "\n".join(texts) if texts else None
