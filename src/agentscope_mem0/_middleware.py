"""``Mem0Middleware``: long-term memory for an AgentScope agent.

This page wires the hooks to their collaborators and does nothing else:
:mod:`._reply` runs one reply (what it recalls, where the note goes, what it
writes), :class:`ClientState` holds what outlives a turn, :mod:`._tools` the
agent's tools and :mod:`._working` working memory.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncGenerator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentscope.middleware import MiddlewareBase
from typing_extensions import Unpack

from ._client_state import ClientState, state_for
from ._exceptions import ConfigurationError, InvalidStateError
from ._memories.lifecycle import said_at_of
from ._modes import Mode
from ._parameters import (
    DEFAULT_TOOL_INSTRUCTIONS,
    Mem0MiddlewareKeywords,
    Mem0MiddlewareParameters,
    check_keywords,
    moved_keyword,
    with_outbox,
)
from ._profile.record import call_store, load_profile, profile_block
from ._recall.note import (
    DEFAULT_MEMORY_SECTION_HEADER,
    DEFAULT_MEMORY_SECTION_INTRO,
    render_note,
)
from ._recall.recall import build_query, retrieve
from ._reply import ReplyWatch, query_text
from ._scope import Scope, check_user_id, resolve_agent_id
from ._text.periods import time_in
from ._tools.choose import build_tools
from ._tools.long_term import STATE_KEY, STORED_THIS_REPLY, ToolContext
from ._working.manager import WorkingMemoryManager

if TYPE_CHECKING:
    from agentscope.agent import Agent
    from agentscope.embedding import EmbeddingModelBase
    from agentscope.model import ChatModelBase
    from agentscope.tool import ToolBase

    from ._working.stores import WorkingStore

__all__ = ["Mem0Middleware"]

logger = logging.getLogger(__name__)


class Mem0Middleware(MiddlewareBase):
    """Long-term memory for AgentScope agents, backed by mem0.

    A drop-in for ``agentscope.middleware.Mem0Middleware``: same keywords, same
    modes, same tools; this package's own options come as one
    ``parameters=Mem0Middleware.Parameters(...)``. Writes happen in the
    background unless ``await_write``. One instance may serve several agents
    and is safe to share.
    """

    Parameters = Mem0MiddlewareParameters
    """This package's options as one pydantic model (AgentScope's convention)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Mem0Middleware:
        # Release 0.2/0.3's keywords fail here, naming their new spelling:
        # __init__ itself takes exactly today's keywords.
        for name, value in kwargs.items():
            error = moved_keyword(name, value)
            if error is not None:
                raise error
        return super().__new__(cls)

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
        parameters: Mem0MiddlewareParameters | None = None,
        client_state: ClientState | None = None,
        judge_model: ChatModelBase | None = None,
        working_store: WorkingStore | None = None,
    ) -> None:
        """Set up memory for one user.

        The keywords up to ``tool_instructions`` are AgentScope's built-in
        ones, with the same meaning; ``parameters`` holds this package's
        options; the last three are objects, not options.

        Args:
            user_id: Whose memories these are: not blank, no whitespace, not ``"*"``.
            client: A ready ``mem0.AsyncMemory`` or ``mem0.AsyncMemoryClient``;
                it wins over the three arguments below.
            chat_model: The AgentScope model mem0 extracts memories with.
            embedding_model: The AgentScope model mem0 embeds memories with.
            mem0_config: A mem0 ``MemoryConfig`` (or dict) to start from.
            mode: ``"static_control"``, ``"agent_control"`` or ``"both"``.
            agent_id: mem0's ``agent_id``: a string, a function of the agent,
                or ``None`` for the agent's ``name``.
            top_k: Memories retrieved per automatic search.
            threshold: Minimum similarity score; ``None`` leaves it to mem0.
            scope_search_by_agent: Search only this agent's memories of the user.
            await_write: Block the reply until mem0 stored the exchange.
            memory_section_header: First line of the memory note.
            memory_section_intro: Line under the header explaining the memories.
            tool_instructions: Appended to the system prompt in tool modes.
            parameters: This package's options (recall, the note's budget,
                the outbox, deadlines, the time judgement, tools, working
                memory): a :attr:`Parameters`; ``None`` for the defaults.
            client_state: State shared by the middlewares on one client (service
                mode passes it): its breaker, profile cache, write queue and
                judge are used, and :meth:`aclose` only flushes it. Its judge
                must look where this middleware reads (its ``search_by_agent``
                is ``scope_search_by_agent``).
            judge_model: The chat model of the time judgement (see
                ``docs/time.md``); default: the model mem0 extracts with.
            working_store: Where working memory is kept, shared wider than
                the default (beside the mem0 client's data), e.g. a
                ``PostgresWorkingStore``; the caller closes it.

        Raises:
            ConfigurationError: A bad ``user_id``, an unknown ``mode``, a value
                out of range, or no usable backend (it is a ``ValueError``).
            TypeError: A synchronous mem0 client, a release 0.3 keyword
                (naming its new spelling), or an unknown keyword.
        """
        check_user_id(user_id)
        check_keywords(
            "Mem0Middleware",
            {"mode": mode, "agent_id": agent_id, "top_k": top_k, "parameters": parameters},
        )
        self._parameters = parameters if parameters is not None else Mem0MiddlewareParameters()
        if client_state is not None and client not in (None, client_state.client):
            raise ConfigurationError("client_state brings its client; drop client=")
        if client_state is not None and judge_model is not None:
            raise ConfigurationError("client_state brings its time judge; drop judge_model=")
        if client_state is not None and client_state.judge.search_by_agent != scope_search_by_agent:
            # One scope for judging and reading: a change must supersede what the reads show.
            raise ConfigurationError(
                f"this middleware reads {_read_scope(scope_search_by_agent)} but client_state "
                f"judges new memories against {_read_scope(client_state.judge.search_by_agent)}; "
                f"build it with ClientState(..., search_by_agent={scope_search_by_agent})"
            )
        if working_store is not None and self._parameters.working_memory is None:
            raise ConfigurationError(
                "working_store= is for working memory, which is off: pass "
                "parameters=Mem0Middleware.Parameters(working_memory='conversation') or 'user'"
            )
        self._user_id = user_id
        self._mode: Mode = mode
        self._agent_id = agent_id
        self._top_k = top_k
        self._threshold = threshold
        self._scope_search_by_agent = scope_search_by_agent
        self._await_write = await_write
        self._memory_section_header = memory_section_header
        self._memory_section_intro = memory_section_intro
        self._tool_instructions = tool_instructions
        self._state = client_state or state_for(
            self._parameters,
            client=client,
            chat_model=chat_model,
            embedding_model=embedding_model,
            mem0_config=mem0_config,
            judge_model=judge_model,
            search_by_agent=scope_search_by_agent,
        )
        self._owns_state = client_state is None
        working = self._parameters.working_memory
        self._working = (
            None
            if working is None
            else WorkingMemoryManager(
                working,
                user_id=user_id,
                client=self._state.client,
                tools_offered=mode != "static_control",
                store=working_store,
            )
        )
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
        **keywords: Unpack[Mem0MiddlewareKeywords],
    ) -> Mem0Middleware:
        """Memory on the embedded default: no server, no key, one data folder.

        Args:
            user_id: Whose memories these are.
            chat_model: The model mem0 extracts with (may be the agent's own).
            embedding_model: Default: the offline embedder of ``[local]``.
            folder: The data folder (default ``$AGENTSCOPE_MEM0_DIR`` or
                ``~/.agentscope-mem0``); the write outbox lives there too,
                unless ``Parameters(outbox=...)`` says otherwise.
            **keywords: The constructor's other keywords (``mode``,
                ``parameters``, ...; see :class:`Mem0MiddlewareKeywords`).

        Raises:
            StoreLockedError: Another process uses the folder.
            DimensionMismatchError: The folder holds vectors of another size.
            TypeError: An unknown keyword, or one of release 0.3 (naming its
                new spelling).
        """
        from ._mem0.clients import build_local_memory, close_memory
        from .local import data_dir

        check_keywords("Mem0Middleware.local", keywords)
        keywords["parameters"] = with_outbox(keywords.get("parameters"), data_dir(folder))
        client = build_local_memory(chat_model, embedding_model=embedding_model, folder=folder)
        try:
            middleware = cls(user_id=user_id, client=client, **keywords)
        except BaseException:
            close_memory(client)
            raise
        middleware.client_state.closes_client = True  # built here, so closed by aclose()
        middleware.folder = data_dir(folder)
        return middleware

    # -- public surface -------------------------------------------------

    @property
    def client(self) -> Any:
        """The mem0 client in use."""
        return self._state.client

    @property
    def client_state(self) -> ClientState:
        """The state this middleware shares with the others on its client."""
        return self._state

    @property
    def user_id(self) -> str:
        """Whose memories this middleware reads and writes."""
        return self._user_id

    @property
    def mode(self) -> Mode:
        """The control mode."""
        return self._mode

    @property
    def parameters(self) -> Mem0MiddlewareParameters:
        """This package's options in use (the outbox filled in by :meth:`local`)."""
        return self._parameters

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until every write queued so far is stored (and judged).

        Returns:
            True when the queue drained within ``timeout``.
        """
        return await self._state.flush(timeout)

    async def aclose(self, timeout: float | None = None) -> bool:
        """Flush pending writes (up to ``timeout`` seconds) and release resources.

        Writes not stored by then stay in the outbox (unless it is in memory)
        for the next middleware on it. A client this middleware built (from
        the models, or in :meth:`local`) is closed: the data folder is free
        for another process once no other client of this one uses it. A
        client passed in stays open; a shared ``client_state`` is only
        flushed. Idempotent.

        Returns:
            True when every queued write was stored.
        """
        if self._closed:
            return True
        self._closed = True
        if not self._owns_state:
            return await self._state.flush(timeout)
        return await self._state.aclose(timeout)

    async def __aenter__(self) -> Mem0Middleware:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def stats(self) -> dict[str, Any]:
        """Counters and latencies of searches, writes and judgements on this
        middleware's client (see :meth:`ClientState.stats`)."""
        return self._state.stats()

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
        After the final assistant message: queue the exchange for mem0. A
        reply that stops for a confirmation or an external tool writes
        nothing yet; the resumption event that continues it is not searched,
        and the question is written with the answer once the resumed reply
        completes. ``agent_control`` mode neither searches nor writes here. A
        failed or slow search never fails the reply; a closed middleware does
        (``InvalidStateError``), before anything runs.
        """
        if self._closed or self._state.writer.closed:
            raise InvalidStateError(
                f"Mem0Middleware of user {self._user_id!r} was closed (aclose()); a reply "
                "through it would neither recall nor store memories. Build a new one"
            )
        automatic, state = self._mode != "agent_control", self._state
        scope = Scope(self._user_id, self._bind_agent(agent))
        inputs = input_kwargs.get("inputs")
        query = query_text(inputs) if automatic else None
        note = None
        if query is not None:  # the turn's recall never raises: a failure is no memories
            # What add_memory stored in an earlier reply that never ended is no part of this one.
            agent.state.middle_context.get(STATE_KEY, {}).pop(STORED_THIS_REPLY, None)
            parameters = self._parameters
            hits = await retrieve(
                state.backend,
                scope.searched(by_agent=self._scope_search_by_agent),
                build_query(query, agent.state.context, turns=parameters.query_context_turns),
                recall=parameters.recall,
                top_k=self._top_k,
                threshold=self._threshold,
                profile_cache=state.profile_recall,
                timeout=parameters.search_timeout,
                breaker=state.breaker,
                include_superseded=parameters.include_superseded,
                # Read against the turn's own time, so a replayed chat asks of its day.
                period=time_in(query, said_at_of(inputs) or datetime.now(UTC)),
            )
            note = render_note(
                hits,
                header=self._memory_section_header,
                intro=self._memory_section_intro,
                rules=parameters.memory_section_rules,
                max_tokens=parameters.max_memory_tokens,
                profile=await self._profile_block() if parameters.profile else None,
            )

        watch = ReplyWatch(
            query,
            note,
            accumulate=self._parameters.accumulate_notes,
            header=self._memory_section_header,
        )
        if self._working is not None:
            next_handler = self._working.around(agent, next_handler)
        async for item in next_handler(**input_kwargs):
            watch.see(item, agent.state.context)
            yield item

        if automatic:
            entry = agent.state.middle_context.setdefault(STATE_KEY, {})
            messages = watch.exchange(entry, inputs)
            if messages is not None:
                await state.writer.submit(
                    scope, messages, wait=self._await_write, said_at=said_at_of(inputs)
                )

    async def on_system_prompt(self, agent: Agent, current_prompt: str) -> str:
        """Appends the tool instructions in ``agent_control`` and ``both`` modes."""
        self._bind_agent(agent)
        if self._mode == "static_control":
            return current_prompt
        return f"{current_prompt}\n\n{self._tool_instructions}"

    async def list_tools(self) -> list[ToolBase]:
        """The ``tools`` chosen (default ``search_memory``, ``add_memory``) in tool
        modes, and ``update_working_memory`` with working memory on."""
        if self._mode == "static_control":
            return []
        context = ToolContext.of(
            self._state,
            self._parameters,
            user_id=self._user_id,
            agent_id=self._agent_id,
            threshold=self._threshold,
            scope_search_by_agent=self._scope_search_by_agent,
            writes_replies=self._mode == "both",
        )
        return build_tools(context, self._parameters.tools, self._working)

    # -- internals ------------------------------------------------------

    async def _profile_block(self) -> str | None:
        """The user's profile block, read within ``search_timeout``; ``None``
        when there is none or the store did not answer (the reply goes on)."""
        store = self._state.profile_store
        try:
            record = await asyncio.wait_for(
                call_store(store, load_profile, self._user_id),
                self._parameters.search_timeout,
            )
        except Exception as exc:  # a slow or failing store never fails a reply
            logger.warning("profile of user %s not read: %r", self._user_id, exc)
            return None
        if record is None and self._state.profile is not None:
            self._state.profile.missing(self._user_id)  # in the background
        return profile_block(record)

    def _bind_agent(self, agent: Agent) -> str:
        """Record the agent's id in its own state, where the tools look it up."""
        agent_id = resolve_agent_id(self._agent_id, agent)
        agent.state.middle_context.setdefault(STATE_KEY, {})["agent_id"] = agent_id
        return agent_id


def _read_scope(by_agent: bool) -> str:
    """The memories a read sees, in words, under ``scope_search_by_agent``."""
    if by_agent:
        return "the agent's memories and the user's of no agent (scope_search_by_agent=True)"
    return "every agent's memories of the user (scope_search_by_agent=False)"
