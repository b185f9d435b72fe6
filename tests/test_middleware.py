"""Mem0Middleware: construction, the three modes, scopes, resumptions."""

from __future__ import annotations

import functools
import logging
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.event import ExternalExecutionResultEvent, ReplyStartEvent
from agentscope.message import HintBlock, Msg, ToolCallBlock, ToolResultBlock, UserMsg
from agentscope.tool import ToolBase, Toolkit

from agentscope_mem0 import ConfigurationError, Mem0Middleware
from agentscope_mem0._recall.note import is_memory_note
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import RecordingClient, real_memory


def _agent(model: ScriptedChatModel, mw: Mem0Middleware, name: str = "assistant") -> Agent:
    return Agent(name=name, system_prompt="You help.", model=model, middlewares=[mw])


def _notes(agent: Agent) -> list[Msg]:
    return [m for m in agent.state.context if is_memory_note(m)]


def _hint_text(msg: Msg) -> str:
    return "\n".join(b.hint for b in msg.content if isinstance(b, HintBlock))  # type: ignore[misc]


# -- validation matrix ------------------------------------------------------


@pytest.mark.parametrize("user_id", ["", "   ", "\t\n"])
def test_blank_user_id_is_rejected(user_id: str, store_config: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="user_id"):
        Mem0Middleware(user_id=user_id, client=RecordingClient(None))


def test_unknown_mode_is_rejected() -> None:
    with pytest.raises(ValueError, match="unknown mode 'auto'"):
        Mem0Middleware(user_id="u", client=RecordingClient(None), mode="auto")  # type: ignore[arg-type]


def test_no_backend_names_every_way_to_give_one() -> None:
    with pytest.raises(ValueError) as info:
        Mem0Middleware(user_id="u")
    for word in ("client", "mem0_config", "chat_model"):
        assert word in str(info.value)


def test_one_model_without_config_is_rejected(embedding: HashEmbedding) -> None:
    with pytest.raises(ValueError, match="chat_model"):
        Mem0Middleware(user_id="u", embedding_model=embedding)
    with pytest.raises(ValueError, match="embedding_model"):
        Mem0Middleware(user_id="u", chat_model=ScriptedChatModel())


def test_configuration_error_is_a_value_error() -> None:
    assert issubclass(ConfigurationError, ValueError)


def test_client_wins_and_one_warning_names_every_ignored_keyword(
    caplog: pytest.LogCaptureFixture, embedding: HashEmbedding
) -> None:
    client = RecordingClient(None)
    with caplog.at_level(logging.WARNING):
        mw = Mem0Middleware(
            user_id="u",
            client=client,
            chat_model=ScriptedChatModel(),
            embedding_model=embedding,
            mem0_config={"history_db_path": "x"},
        )
    assert mw.client is client
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    for word in ("chat_model", "embedding_model", "mem0_config"):
        assert word in warnings[0].getMessage()


class _SyncClient:
    def search(self, *a: Any, **k: Any) -> Any:
        return {"results": []}

    def add(self, *a: Any, **k: Any) -> Any:
        return {"results": []}


def test_sync_client_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="async mem0 client"):
        Mem0Middleware(user_id="u", client=_SyncClient())


def test_mem0_sync_memory_is_a_type_error(store_config: dict[str, Any]) -> None:
    from mem0 import Memory

    from agentscope_mem0 import build_mem0_config

    sync = Memory(
        config=build_mem0_config(
            chat_model=ScriptedChatModel(),
            embedding_model=HashEmbedding(),
            mem0_config=store_config,
        )
    )
    with pytest.raises(TypeError):
        Mem0Middleware(user_id="u", client=sync)


def _sync_wrapper(func: Any) -> Any:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    return wrapper


class _WrappedAsyncClient:
    """Like mem0's hosted client: async methods behind a sync decorator."""

    @_sync_wrapper
    async def search(self, *a: Any, **k: Any) -> Any:
        return {"results": []}

    @_sync_wrapper
    async def add(self, *a: Any, **k: Any) -> Any:
        return {"results": []}


def test_async_methods_behind_sync_decorator_are_accepted() -> None:
    mw = Mem0Middleware(user_id="u", client=_WrappedAsyncClient())
    assert isinstance(mw.client, _WrappedAsyncClient)


@pytest.mark.parametrize("kwargs", [{"top_k": 0}, {"top_k": True}, {"agent_id": " "}])
def test_bad_numbers_and_ids_are_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        Mem0Middleware(user_id="u", client=RecordingClient(None), **kwargs)


# -- static_control -----------------------------------------------------------


async def test_static_control_searches_places_note_and_writes(
    store_config: dict[str, Any],
) -> None:
    model = ScriptedChatModel(["Noted.", "Sure."])
    memory = real_memory(store_config, chat_model=model)
    await memory.add(
        [{"role": "user", "content": "User prefers dark mode charts"}],
        user_id="alice",
        agent_id="assistant",
        infer=False,
    )
    client = RecordingClient(memory)
    mw = Mem0Middleware(user_id="alice", client=client, mode="static_control")
    agent = _agent(model, mw)
    assert await mw.list_tools() == []
    assert await mw.on_system_prompt(agent, "base") == "base"

    reply = await agent.reply(UserMsg(name="user", content="Draw my charts please"))
    assert reply.get_text_content() == "Noted."
    await mw.flush()

    (args, kwargs), *_ = client.named("search")
    assert args == ("Draw my charts please",)
    assert kwargs["filters"] == {"user_id": "alice", "agent_id": "assistant"}
    assert kwargs["top_k"] == 5

    context = agent.state.context
    user_index = next(i for i, m in enumerate(context) if m.role == "user")
    assert is_memory_note(context[user_index + 1])
    assert "User prefers dark mode charts" in _hint_text(context[user_index + 1])
    # the model saw the memory in the call that produced the reply
    assert any(is_memory_note(m) for m in model.calls[0])

    (add_args, add_kwargs), *_ = client.named("add")
    assert add_args[0] == [
        {"role": "user", "content": "Draw my charts please"},
        {"role": "assistant", "content": "Noted."},
    ]
    assert add_kwargs["user_id"] == "alice"
    assert add_kwargs["agent_id"] == "assistant"


async def test_note_is_placed_after_the_user_message_at_reply_start(
    store_config: dict[str, Any],
) -> None:
    memory = real_memory(store_config)
    await memory.add("User lives in Hangzhou", user_id="u", agent_id="a", infer=False)
    mw = Mem0Middleware(user_id="u", client=memory, mode="static_control", agent_id="a")
    agent = _agent(ScriptedChatModel(), mw)
    seen_at_start: list[list[Msg]] = []

    async def next_handler(**kwargs: Any) -> Any:
        agent.state.context.append(kwargs["inputs"])
        yield ReplyStartEvent(session_id="s", reply_id="r", name="a")
        seen_at_start.append(list(agent.state.context))

    inputs = UserMsg(name="user", content="Where do I live, Hangzhou?")
    async for _ in mw.on_reply(agent, {"inputs": inputs}, next_handler):
        pass
    context = seen_at_start[0]
    assert [m.role for m in context] == ["user", "assistant"]
    assert is_memory_note(context[1])


async def test_agent_id_defaults_to_agent_name_and_may_be_a_function(
    store_config: dict[str, Any],
) -> None:
    client = RecordingClient(real_memory(store_config))
    mw = Mem0Middleware(user_id="u", client=client, mode="static_control", await_write=True)
    await _agent(ScriptedChatModel(), mw, name="researcher").reply(UserMsg("user", "hi there"))
    assert client.named("add")[-1][1]["agent_id"] == "researcher"

    mw2 = Mem0Middleware(
        user_id="u",
        client=client,
        mode="static_control",
        await_write=True,
        agent_id=lambda agent: f"team-{agent.name}",
    )
    await _agent(ScriptedChatModel(), mw2, name="coder").reply(UserMsg("user", "hello"))
    assert client.named("add")[-1][1]["agent_id"] == "team-coder"
    assert client.named("search")[-1][1]["filters"]["agent_id"] == "team-coder"


async def test_search_by_user_only_when_not_scoped_by_agent(
    store_config: dict[str, Any],
) -> None:
    client = RecordingClient(real_memory(store_config))
    mw = Mem0Middleware(
        user_id="u", client=client, mode="static_control", scope_search_by_agent=False
    )
    await _agent(ScriptedChatModel(), mw).reply(UserMsg("user", "hello"))
    await mw.flush()
    assert client.named("search")[0][1]["filters"] == {"user_id": "u"}
    assert client.named("add")[0][1]["agent_id"] == "assistant"


class _ExternalLookup(ToolBase):
    name = "lookup"
    description = "Looks something up outside the agent."
    input_schema = {"type": "object", "properties": {"q": {"type": "string"}}}  # noqa: RUF012
    is_concurrency_safe = True
    is_read_only = True
    is_external_tool = True

    async def check_permissions(self, *a: Any, **k: Any) -> Any:
        from agentscope.permission import PermissionBehavior, PermissionDecision

        return PermissionDecision(behavior=PermissionBehavior.ALLOW, message="ok")


async def test_resumption_is_not_searched_and_the_parked_exchange_is_written_once(
    store_config: dict[str, Any],
) -> None:
    call = ToolCallBlock(id="call-1", name="lookup", input='{"q": "x"}')
    model = ScriptedChatModel([[call], "Done with the lookup."])  # type: ignore[list-item]
    client = RecordingClient(real_memory(store_config))
    mw = Mem0Middleware(user_id="u", client=client, mode="static_control", await_write=True)
    agent = Agent(
        name="assistant",
        system_prompt="You help.",
        model=model,
        middlewares=[mw],
        toolkit=Toolkit(tools=[_ExternalLookup()]),
    )
    async for _ in agent.reply_stream(UserMsg("user", "please look x up")):
        pass
    assert len(client.named("search")) == 1
    assert client.named("add") == []  # parked: no final answer yet

    result = ToolResultBlock(id="call-1", name="lookup", output="x is 42")
    resume = ExternalExecutionResultEvent(reply_id=agent.state.reply_id, execution_results=[result])
    final = await agent.reply(resume)
    assert final.get_text_content() == "Done with the lookup."
    assert len(client.named("search")) == 1  # the resumption searched nothing
    # the question is written once, with the real answer, not the placeholder
    (((messages,), _),) = client.named("add")
    assert messages == [
        {"role": "user", "content": "please look x up"},
        {"role": "assistant", "content": "Done with the lookup."},
    ]


# -- agent_control and both ---------------------------------------------------


async def test_agent_control_has_tools_and_nudge_but_no_automatic_io(
    store_config: dict[str, Any],
) -> None:
    client = RecordingClient(real_memory(store_config))
    mw = Mem0Middleware(user_id="u", client=client, mode="agent_control")
    toolkit = Toolkit(tools=await mw.list_tools())
    agent = Agent(
        name="assistant",
        system_prompt="base",
        model=ScriptedChatModel(),
        middlewares=[mw],
        toolkit=toolkit,
    )
    before = {t.name for t in await toolkit.get_tools()} if hasattr(toolkit, "get_tools") else None
    await agent.reply(UserMsg("user", "I live in Hangzhou."))
    await mw.flush()
    assert client.calls == []
    assert _notes(agent) == []
    assert sorted(t.name for t in await mw.list_tools()) == ["add_memory", "search_memory"]
    prompt = await mw.on_system_prompt(agent, "base")
    assert prompt.startswith("base\n\n")
    assert "search_memory" in prompt and "add_memory" in prompt
    if before is not None:
        assert {t.name for t in await toolkit.get_tools()} == before


async def test_both_mode_does_everything(store_config: dict[str, Any]) -> None:
    client = RecordingClient(real_memory(store_config))
    mw = Mem0Middleware(user_id="u", client=client)  # default mode is "both"
    assert mw.mode == "both"
    agent = _agent(ScriptedChatModel("Hi."), mw)
    await agent.reply(UserMsg("user", "I live in Hangzhou."))
    await mw.flush()
    # the reply's own search; consolidation's look-ups after the write query stored texts
    assert [q for (q,), _ in client.named("search") if q == "I live in Hangzhou."] == [
        "I live in Hangzhou."
    ]
    assert len(client.named("add")) == 1
    assert len(await mw.list_tools()) == 2
    assert "search_memory" in await mw.on_system_prompt(agent, "")


async def test_failed_search_does_not_fail_the_reply(store_config: dict[str, Any]) -> None:
    class Broken(RecordingClient):
        async def search(self, *a: Any, **k: Any) -> Any:
            raise ConnectionError("mem0 is down")

    mw = Mem0Middleware(user_id="u", client=Broken(real_memory(store_config)), await_write=True)
    reply = await _agent(ScriptedChatModel("Still here."), mw).reply(UserMsg("user", "hello"))
    assert reply.get_text_content() == "Still here."


async def test_slow_search_is_abandoned_after_search_timeout(
    store_config: dict[str, Any],
) -> None:
    import time

    client = RecordingClient(real_memory(store_config), search_delay=30)
    mw = Mem0Middleware(
        user_id="u", client=client, parameters=Mem0Middleware.Parameters(search_timeout=0.2)
    )
    started = time.perf_counter()
    reply = await _agent(ScriptedChatModel("Quick."), mw).reply(UserMsg("user", "hello"))
    assert reply.get_text_content() == "Quick."
    assert time.perf_counter() - started < 5


async def test_breaker_skips_searches_after_repeated_timeouts_and_stats_count_them(
    store_config: dict[str, Any],
) -> None:
    client = RecordingClient(real_memory(store_config), search_delay=30)
    mw = Mem0Middleware(
        user_id="u",
        client=client,
        parameters=Mem0Middleware.Parameters(
            search_timeout=0.1, breaker_threshold=2, breaker_cooldown=60
        ),
    )
    agent = _agent(ScriptedChatModel("Fine."), mw)
    for _ in range(4):
        reply = await agent.reply(UserMsg("user", "hello again"))
        assert reply.get_text_content() == "Fine."
    assert await mw.aclose(timeout=30)
    assert len(client.named("search")) == 2  # the breaker opened after two timeouts
    stats = mw.stats()
    assert stats["search_timeouts"] == 2
    assert stats["searches_skipped"] == 2
    assert stats["breaker_state"] == "open"
    assert stats["writes_stored"] == 4
    assert stats["writes_pending"] == 0


@pytest.mark.parametrize("agent_id", ["*", " coder", "coder "])
def test_agent_ids_mem0_would_widen_are_rejected(agent_id: str) -> None:
    with pytest.raises(ValueError, match="agent_id"):
        Mem0Middleware(user_id="u", client=RecordingClient(None), agent_id=agent_id)


async def test_an_agent_named_like_a_wildcard_is_refused(store_config: dict[str, Any]) -> None:
    mw = Mem0Middleware(user_id="u", client=real_memory(store_config))
    with pytest.raises(ValueError, match="agent_id"):
        await _agent(ScriptedChatModel(), mw, name="*").reply(UserMsg("user", "hi"))
