"""State that lives as long as the client: the factory's middlewares share the
breaker, the profile cache, the counters and the write queue across turns."""

from __future__ import annotations

import asyncio
import statistics
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentscope.agent import Agent
from agentscope.message import UserMsg

from agentscope_mem0 import ClientState, ConfigurationError, Mem0Middleware
from agentscope_mem0.service import mem0_middleware_factory
from agentscope_mem0.testing import ScriptedChatModel
from fakes import AppUser, RecordingClient, ScriptedCredential, note_text, real_memory


class HungSearch(RecordingClient):
    """A real mem0 whose search never answers."""

    async def search(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("search", args, kwargs))
        await asyncio.sleep(60)


class RefusedWrites(RecordingClient):
    """A real mem0 that refuses every write (so no write refreshes a profile)."""

    async def add(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("add", args, kwargs))
        raise ValueError("writes are refused in this test")


async def test_through_agentscope_app_the_breaker_outlives_the_turn(
    tmp_path: Path, store_config: dict[str, Any]
) -> None:
    """agentscope.app calls the factory once per chat run; a hung search costs the
    deadline only until the breaker opens, then later turns skip it."""
    from agentscope.app import create_app
    from agentscope.app.message_bus import InMemoryMessageBus
    from agentscope.app.storage import AsyncSQLAlchemyStorage
    from agentscope.app.workspace_manager import LocalWorkspaceManager

    client = HungSearch(real_memory(store_config))
    factory = mem0_middleware_factory(
        client=client,
        mode="static_control",
        parameters=Mem0Middleware.Parameters(breaker_threshold=3, search_timeout=0.4),
    )
    app = create_app(
        storage=AsyncSQLAlchemyStorage(f"sqlite+aiosqlite:///{tmp_path / 'app.db'}"),
        message_bus=InMemoryMessageBus(),
        workspace_manager=LocalWorkspaceManager(str(tmp_path / "ws")),
        enable_scheduler=False,
        enable_channel_worker=False,
        enable_index_worker=False,
        extra_credentials=[ScriptedCredential],
        extra_agent_middlewares=factory,
    )
    factory.install(app)
    made: list[Any] = []
    real_call = factory.__call__

    async def counted(*args: Any) -> Any:
        made.extend(await real_call(*args))
        return made[-1:]

    app.state.extra_agent_middlewares = counted  # the app's per-turn call, counted

    transport = httpx.ASGITransport(app=app)
    durations = []
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://app") as http,
    ):
        user = AppUser(http, "alice")
        await user.setup()
        session = await user.new_session("one")
        for turn in range(7):
            started = time.perf_counter()
            await user.chat(session, f"Turn {turn}: I like tea.")
            durations.append(time.perf_counter() - started)
        stats = factory.stats()

    assert len(made) == 7 and len({id(mw) for mw in made}) == 7  # a middleware per turn
    assert len(client.named("search")) == 3  # the breaker opened after three timeouts
    assert stats["search_timeouts"] == 3
    assert stats["searches_skipped"] == 4
    assert stats["breaker_opened"] == 1 and stats["breaker_state"] == "open"
    assert stats["writes_queued"] == 7  # the totals of all seven middlewares
    # The first turns waited out the deadline; the skipped ones did not (the
    # median, so that one turn slowed by a busy machine does not decide it).
    assert min(durations[:3]) >= 0.4
    assert statistics.median(durations[3:]) < min(durations[:3])


async def test_a_profile_is_read_once_per_ttl_across_turns(store_config: dict[str, Any]) -> None:
    memory = real_memory(store_config)
    await memory.add("User likes green tea", user_id="alice", agent_id="assistant", infer=False)
    await memory.add("User likes jazz", user_id="bob", agent_id="assistant", infer=False)
    client = RefusedWrites(memory)
    factory = mem0_middleware_factory(
        client=client,
        mode="static_control",
        parameters=Mem0Middleware.Parameters(recall="profile", profile_ttl=60),
    )
    notes = []
    for turn in range(4):
        for user in ("alice", "bob"):
            # as agentscope.app does: a middleware and an agent per turn, dropped after it
            (mw,) = await factory(user, "assistant", f"s-{user}")
            model = ScriptedChatModel("Ok.")
            agent = Agent(name="assistant", system_prompt="", model=model, middlewares=[mw])
            await agent.reply(UserMsg("user", f"Hello again, turn {turn}."))
            notes.append((user, note_text(model.calls[-1])))
    reads = [k["filters"]["user_id"] for _, k in client.named("get_all")]
    assert sorted(reads) == ["alice", "bob"]  # one read per user, not one per turn
    assert all(("green tea" in note) == (user == "alice") for user, note in notes)
    assert all(("jazz" in note) == (user == "bob") for user, note in notes)
    await factory.aclose(timeout=5)


async def test_middlewares_given_one_state_share_it(store_config: dict[str, Any]) -> None:
    memory = real_memory(store_config)
    state = ClientState(memory, parameters=Mem0Middleware.Parameters(breaker_threshold=2))
    first = Mem0Middleware(user_id="alice", client_state=state)
    second = Mem0Middleware(user_id="bob", client=memory, client_state=state)
    assert first.client_state is second.client_state is state
    with pytest.raises(ConfigurationError, match="client_state brings"):
        Mem0Middleware(user_id="c", client=real_memory(store_config), client_state=state)
    with pytest.raises(ConfigurationError, match="client_state brings"):
        Mem0Middleware(user_id="c", client_state=state, judge_model=ScriptedChatModel())
    assert first.client is memory
    state.breaker.record_failure()
    state.breaker.record_failure()
    assert first.stats()["breaker_state"] == second.stats()["breaker_state"] == "open"
    assert await first.aclose() and await second.aclose()
    assert not state.writer.closed  # a given state is only flushed
    await state.aclose()
    assert state.writer.closed


async def test_the_judge_looks_where_the_middlewares_read(store_config: dict[str, Any]) -> None:
    """One scope for judging and reading: a state that judges each agent's
    memories apart cannot serve a middleware whose reads show every agent's."""
    memory = real_memory(store_config)
    by_agent = ClientState(memory)
    with pytest.raises(ConfigurationError, match=r"ClientState\(\.\.\., search_by_agent=False\)"):
        Mem0Middleware(user_id="alice", client_state=by_agent, scope_search_by_agent=False)
    await by_agent.aclose()

    shared = ClientState(memory, search_by_agent=False)
    mw = Mem0Middleware(
        user_id="alice", client_state=shared, scope_search_by_agent=False, mode="static_control"
    )
    for agent, text in (("a1", "I live in Hangzhou."), ("a2", "I moved to Beijing.")):
        bot = Agent(name=agent, system_prompt="", model=ScriptedChatModel("Ok."), middlewares=[mw])
        await bot.reply(UserMsg("user", text))
        assert await mw.flush(timeout=30)
    model = ScriptedChatModel("Ok.")
    bot = Agent(name="a1", system_prompt="", model=model, middlewares=[mw])
    await bot.reply(UserMsg("user", "Where do I live?"))
    note = note_text(model.calls[-1])
    assert "Beijing" in note and "Hangzhou" not in note
    await shared.aclose()


def test_a_misspelled_keyword_or_field_is_a_type_error(store_config: dict[str, Any]) -> None:
    memory = real_memory(store_config)
    with pytest.raises(TypeError, match="unexpected keyword"):
        Mem0Middleware(user_id="u", client=memory, top_kk=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="no field 'search_timout'"):
        Mem0Middleware.Parameters(search_timout=1.0)  # type: ignore[call-arg]
