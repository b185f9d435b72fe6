"""Service mode: the ``extra_agent_middlewares`` factory, alone and inside a real
``agentscope.app`` served over HTTP."""

from __future__ import annotations

import asyncio
import gc
import inspect
import json
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from agentscope.agent import Agent
from agentscope.message import UserMsg

import agentscope_mem0.service as service_module
from agentscope_mem0 import (
    ConfigurationError,
    InvalidStateError,
    Mem0Middleware,
)
from agentscope_mem0.service import Mem0MiddlewareFactory, check_user_id, mem0_middleware_factory
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import AppUser, RecordingClient, ScriptedCredential, note_text, real_memory, recalled

# -- helpers ---------------------------------------------------------------


def _factory(store_config: dict[str, Any], **options: Any) -> Mem0MiddlewareFactory:
    return mem0_middleware_factory(
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(),
        mem0_config=store_config,
        **options,
    )


# -- the factory's contract ------------------------------------------------


def test_signature_fits_both_forms_agentscope_app_probes(store_config: dict[str, Any]) -> None:
    factory = _factory(store_config)
    # agentscope.app.ChatService probes exactly this to decide on the fourth argument.
    inspect.signature(factory).bind("", "", "", None)
    inspect.signature(factory).bind("", "", "")
    assert inspect.iscoroutinefunction(factory.__call__)


@pytest.mark.parametrize(
    "user_id", ["", "   ", "\t\n", None, 42, "alice ", " alice", "*", "alice smith", "a\u00a0b"]
)
async def test_a_user_id_mem0_cannot_store_gets_a_turn_without_memory(
    user_id: Any, store_config: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    memory = RecordingClient(real_memory(store_config))
    factory = mem0_middleware_factory(client=memory)
    with caplog.at_level("WARNING", logger="agentscope_mem0.service"):
        assert await factory(user_id, "agent", "session") == []
        assert await factory(user_id, "agent", "session") == []
    warnings = [r for r in caplog.records if "without memory" in r.getMessage()]
    assert len(warnings) == 1  # once per id, not once per turn
    assert "user_id" in warnings[0].getMessage()
    with pytest.raises(ConfigurationError, match="user_id"):
        check_user_id(user_id)
    with pytest.raises(ConfigurationError, match="user_id"):
        Mem0Middleware(user_id=user_id, client=memory)
    assert memory.calls == []


def test_check_user_id_returns_good_ids_unchanged() -> None:
    for user_id in ("alice", "u-1", "42", "用户", "a*b"):
        assert check_user_id(user_id) == user_id


def test_a_fixed_user_id_is_refused() -> None:
    with pytest.raises(TypeError, match="user_id"):
        mem0_middleware_factory(client=RecordingClient(None), user_id="alice")


def test_unknown_options_and_modes_fail_at_construction() -> None:
    with pytest.raises(TypeError, match="top_kk"):
        mem0_middleware_factory(client=RecordingClient(None), top_kk=3)
    with pytest.raises(ConfigurationError, match="mode"):
        mem0_middleware_factory(client=RecordingClient(None), mode="auto")  # type: ignore[arg-type]


def test_missing_backend_and_wrong_models_fail_at_construction(
    store_config: dict[str, Any],
) -> None:
    with pytest.raises(ConfigurationError, match="client"):
        mem0_middleware_factory()
    with pytest.raises(ConfigurationError, match="folder"):
        mem0_middleware_factory(
            chat_model=ScriptedChatModel(), folder="/tmp/x", mem0_config=store_config
        )
    with pytest.raises(ConfigurationError, match="ChatModelBase"):
        mem0_middleware_factory(
            chat_model="gpt", embedding_model=HashEmbedding(), mem0_config=store_config
        )
    bad_dims = json.loads(json.dumps(store_config))
    bad_dims["vector_store"]["config"]["embedding_model_dims"] = 12
    with pytest.raises(ConfigurationError, match="12"):
        _factory(bad_dims)


def test_sync_client_is_refused() -> None:
    class Sync:
        def add(self, *a: Any, **k: Any) -> None: ...
        def search(self, *a: Any, **k: Any) -> None: ...

    with pytest.raises(TypeError, match="async"):
        mem0_middleware_factory(client=Sync())


async def test_each_call_returns_a_fresh_middleware_on_one_given_client(
    store_config: dict[str, Any],
) -> None:
    memory = real_memory(store_config)
    factory = mem0_middleware_factory(client=memory, mode="static_control", top_k=3)
    first = await factory("alice", "agent-1", "s1")
    second = await factory("bob", "agent-1", "s2", None)
    assert len(first) == len(second) == 1
    a, b = first[0], second[0]
    assert isinstance(a, Mem0Middleware) and isinstance(b, Mem0Middleware)
    assert a is not b
    assert a.client is b.client is memory is factory.client
    assert (a.user_id, b.user_id) == ("alice", "bob")
    assert a.mode == "static_control" and a._top_k == 3
    await factory.aclose()
    assert memory.db is not None  # a client passed in is the caller's to close


async def test_agent_id_is_the_apps_agent_id_unless_configured(
    store_config: dict[str, Any],
) -> None:
    memory = RecordingClient(real_memory(store_config))

    async def written_agent_id(factory: Mem0MiddlewareFactory) -> str:
        (mw,) = await factory("alice", "rec-7", "s")
        agent = Agent(
            name="Friday", system_prompt="", model=ScriptedChatModel("Noted."), middlewares=[mw]
        )
        await agent.reply(UserMsg("user", "I live in Oslo."))
        assert await mw.flush(timeout=30)
        return memory.named("add")[-1][1]["agent_id"]

    assert await written_agent_id(mem0_middleware_factory(client=memory)) == "rec-7"
    assert await written_agent_id(mem0_middleware_factory(client=memory, agent_id=None)) == "Friday"
    assert await written_agent_id(mem0_middleware_factory(client=memory, agent_id="x")) == "x"


# -- the shared client -----------------------------------------------------


async def test_client_is_built_once_for_concurrent_first_calls(
    store_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    built: list[threading.Thread] = []
    real_resolve = service_module.resolve_client

    def slow_resolve(**kwargs: Any) -> Any:
        built.append(threading.current_thread())
        threading.Event().wait(0.3)  # widen the race window
        return real_resolve(**kwargs)

    monkeypatch.setattr(service_module, "resolve_client", slow_resolve)
    factory = _factory(store_config)
    assert factory.client is None  # lazily built

    lists = await asyncio.gather(*(factory(f"user{i}", "a", "s") for i in range(25)))
    clients = {id(mws[0].client) for mws in lists}
    assert len(built) == 1 and len(clients) == 1
    assert built[0] is not threading.main_thread()  # built off the event loop
    assert factory.client is lists[0][0].client
    await factory.aclose()


async def test_a_failed_build_fails_its_callers_and_the_next_call_retries(
    store_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts = 0
    real_resolve = service_module.resolve_client

    def flaky(**kwargs: Any) -> Any:
        nonlocal attempts
        attempts += 1
        if attempts == 1:
            threading.Event().wait(0.2)  # so that every caller joins this build
            raise ConnectionError("vector store unreachable")
        return real_resolve(**kwargs)

    monkeypatch.setattr(service_module, "resolve_client", flaky)
    factory = _factory(store_config)
    results = await asyncio.gather(
        *(factory("alice", "a", "s") for _ in range(3)), return_exceptions=True
    )
    assert all(isinstance(r, ConnectionError) for r in results)
    (mw,) = await factory("alice", "a", "s")
    assert attempts == 2 and mw.client is factory.client
    await factory.aclose()


async def test_a_cancelled_first_caller_does_not_cancel_the_build(
    store_config: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_resolve = service_module.resolve_client

    def slow(**kwargs: Any) -> Any:
        threading.Event().wait(0.3)
        return real_resolve(**kwargs)

    monkeypatch.setattr(service_module, "resolve_client", slow)
    factory = _factory(store_config)
    first = asyncio.ensure_future(factory("alice", "a", "s"))
    second = asyncio.ensure_future(factory("bob", "a", "s"))
    await asyncio.sleep(0.05)
    first.cancel()
    (mw,) = await second
    assert mw.client is factory.client is not None
    await factory.aclose()


async def test_aclose_flushes_then_closes_the_client_it_built(
    store_config: dict[str, Any],
) -> None:
    slow_extraction = ScriptedChatModel(delay=0.3)
    factory = mem0_middleware_factory(
        chat_model=slow_extraction,
        embedding_model=HashEmbedding(),
        mem0_config=store_config,
        mode="static_control",
    )
    (mw,) = await factory("alice", "assistant", "s")
    agent = Agent(
        name="assistant", system_prompt="", model=ScriptedChatModel("Noted."), middlewares=[mw]
    )
    await agent.reply(UserMsg("user", "I live in Lisbon."))
    del agent, mw  # the app drops its agent after the turn; the write is still queued
    client = factory.client
    assert await factory.aclose(timeout=30)
    assert client.db is None  # history database closed
    with pytest.raises(InvalidStateError):
        await factory("alice", "assistant", "s")
    assert await factory.aclose()  # idempotent

    reopened = real_memory(store_config)
    stored = await reopened.get_all(filters={"user_id": "alice"})
    assert [m["memory"] for m in stored["results"]] == ["User lives in Lisbon."]


def _writer_tasks() -> list[asyncio.Task[Any]]:
    return [t for t in asyncio.all_tasks() if t.get_name().startswith("agentscope-mem0")]


async def test_every_turn_writes_through_the_one_shared_queue(
    store_config: dict[str, Any],
) -> None:
    factory = _factory(store_config, mode="static_control")
    queues = set()
    for i in range(5):
        # as agentscope.app does: a middleware and an agent per turn, dropped after it
        (mw,) = await factory("alice", "assistant", "s")
        agent = Agent(
            name="assistant", system_prompt="", model=ScriptedChatModel("Ok."), middlewares=[mw]
        )
        await agent.reply(UserMsg("user", f"I visited town{i} today."))
        queues.add(id(mw.client_state.writer))
        del agent, mw
    assert len(queues) == 1
    assert len(_writer_tasks()) <= 3  # the queue's own tasks, not some per turn
    assert await factory.flush(timeout=30)
    stored = await factory.client.get_all(filters={"user_id": "alice"})
    assert sorted(m["memory"] for m in stored["results"]) == [
        f"User visited town{i} today." for i in range(5)
    ]
    await factory.aclose()
    assert _writer_tasks() == []


async def test_install_builds_at_startup_and_flushes_at_shutdown(
    store_config: dict[str, Any],
) -> None:
    from fastapi import FastAPI

    factory = mem0_middleware_factory(
        chat_model=ScriptedChatModel(delay=0.3),  # a slow extraction
        embedding_model=HashEmbedding(),
        mem0_config=store_config,
        mode="static_control",
    )
    app = factory.install(FastAPI())
    async with app.router.lifespan_context(app):
        client = factory.client
        assert client is not None
        assert gc.get_freeze_count() > 0  # what startup built is out of the collector's way
        (mw,) = await factory("alice", "assistant", "s")
        agent = Agent(
            name="assistant", system_prompt="", model=ScriptedChatModel("Noted."), middlewares=[mw]
        )
        await agent.reply(UserMsg("user", "I live in Quito."))
        assert mw.stats()["writes_pending"] == 1
    assert client.db is None
    stored = await real_memory(store_config).get_all(filters={"user_id": "alice"})
    assert [m["memory"] for m in stored["results"]] == ["User lives in Quito."]


async def test_install_can_leave_the_collector_alone(store_config: dict[str, Any]) -> None:
    from fastapi import FastAPI

    factory = mem0_middleware_factory(
        chat_model=ScriptedChatModel(), embedding_model=HashEmbedding(), mem0_config=store_config
    )
    app = factory.install(FastAPI(), freeze_gc=False)
    async with app.router.lifespan_context(app):
        assert factory.client is not None
        assert gc.get_freeze_count() == 0


async def test_hosted_client_is_shared_and_every_request_is_scoped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mem0 import AsyncMemoryClient

    requests: list[tuple[str, dict[str, Any]]] = []

    def platform(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        requests.append((request.url.path, body))
        if request.url.path == "/v3/memories/search/":
            user = body["filters"]["user_id"]
            return httpx.Response(
                200, json={"results": [{"id": "m1", "memory": f"{user} likes tea", "score": 0.9}]}
            )
        return httpx.Response(200, json={"results": []})

    def ping(self: Any) -> None:
        # the constructor pings the platform through `requests`; answer for it
        self.org_id, self.project_id = "org", "project"

    monkeypatch.setattr(AsyncMemoryClient, "_validate_api_key", ping)
    hosted = AsyncMemoryClient(
        api_key="test-key",
        client=httpx.AsyncClient(transport=httpx.MockTransport(platform)),
    )
    factory = mem0_middleware_factory(client=hosted, mode="static_control")
    replies = {}
    for user in ("alice", "bob"):
        (mw,) = await factory(user, f"agent-of-{user}", "s")
        agent = Agent(
            name="assistant", system_prompt="", model=ScriptedChatModel(recalled), middlewares=[mw]
        )
        replies[user] = (await agent.reply(UserMsg("user", "What do I like?"))).get_text_content()
        assert mw.client is hosted
    assert await factory.flush(timeout=10)
    await factory.aclose()

    assert "alice likes tea" in replies["alice"] and "bob" not in replies["alice"]
    assert "bob likes tea" in replies["bob"] and "alice" not in replies["bob"]
    searches = [b for p, b in requests if p == "/v3/memories/search/"]
    adds = [b for p, b in requests if p == "/v3/memories/add/"]
    # the platform files messages by role, so hosted reads name the user only
    assert [s["filters"] for s in searches] == [{"user_id": "alice"}, {"user_id": "bob"}]
    assert sorted((a["user_id"], a["agent_id"]) for a in adds) == [
        ("alice", "agent-of-alice"),
        ("bob", "agent-of-bob"),
    ]
    assert not hosted.async_client.is_closed  # passed in, so not ours to close


# -- a real agentscope.app over HTTP ---------------------------------------


_FACTS = {
    "alice": ("I live in Paris. My favourite colour is teal.", ("Paris", "teal")),
    "bob": ("I live in Berlin. My favourite colour is orange.", ("Berlin", "orange")),
}


def _memory_config(tmp_path: Path) -> dict[str, Any]:
    return {
        "vector_store": {
            "provider": "qdrant",
            "config": {"path": str(tmp_path / "q"), "on_disk": True, "collection_name": "t"},
        },
        "history_db_path": str(tmp_path / "h.db"),
    }


def _app(tmp_path: Path, factory: Mem0MiddlewareFactory) -> Any:
    """A real agentscope.app with the scripted model and ``factory`` installed."""
    from agentscope.app import create_app
    from agentscope.app.message_bus import InMemoryMessageBus
    from agentscope.app.storage import AsyncSQLAlchemyStorage
    from agentscope.app.workspace_manager import IsolationPolicy, LocalWorkspaceManager

    app = create_app(
        storage=AsyncSQLAlchemyStorage(f"sqlite+aiosqlite:///{tmp_path / 'app.db'}"),
        message_bus=InMemoryMessageBus(),
        # a session per workspace, so that one user can open a second session
        workspace_manager=LocalWorkspaceManager(
            str(tmp_path / "ws"), isolation=IsolationPolicy.PER_SESSION
        ),
        enable_scheduler=False,
        enable_channel_worker=False,
        enable_index_worker=False,
        extra_credentials=[ScriptedCredential],
        extra_agent_middlewares=factory,
    )
    return factory.install(app)


async def test_a_refused_user_id_still_gets_its_reply_without_memory(tmp_path: Path) -> None:
    memory = RecordingClient(real_memory(_memory_config(tmp_path)))
    factory = mem0_middleware_factory(client=memory)
    app = _app(tmp_path, factory)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://app") as http,
    ):
        for user_id in ("*", "alice smith"):
            user = AppUser(http, user_id)
            await user.setup()
            session = await user.new_session("first")
            assert await user.chat(session, "I live in Paris.") == "Nothing recalled."
    assert memory.calls == []


async def test_app_users_recall_their_own_facts_across_sessions(tmp_path: Path) -> None:
    extraction = ScriptedChatModel()
    factory = mem0_middleware_factory(
        chat_model=extraction,
        embedding_model=HashEmbedding(),
        mem0_config=_memory_config(tmp_path),
    )
    app = _app(tmp_path, factory)
    transport = httpx.ASGITransport(app=app)
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=transport, base_url="http://app") as http,
    ):
        assert factory.client is not None  # built at startup by install()
        users = {name: AppUser(http, name) for name in _FACTS}
        await asyncio.gather(*(u.setup() for u in users.values()))

        async def first_session(name: str) -> str:
            session = await users[name].new_session("first")
            return await users[name].chat(session, _FACTS[name][0])

        firsts = await asyncio.gather(*(first_session(name) for name in users))
        assert firsts == ["Nothing recalled.", "Nothing recalled."]
        assert await factory.flush(timeout=30)

        async def second_session(name: str) -> str:
            session = await users[name].new_session("second")
            return await users[name].chat(session, "Where do I live? What is my favourite colour?")

        seconds = dict(
            zip(users, await asyncio.gather(*(second_session(n) for n in users)), strict=True)
        )
        client = factory.client
        stored = {
            name: (await client.get_all(filters={"user_id": name}))["results"] for name in users
        }

    for name, (_, own) in _FACTS.items():
        (other,) = set(_FACTS) - {name}
        for word in own:
            assert word in seconds[name], seconds[name]
        for word in _FACTS[other][1]:
            assert word not in seconds[name], seconds[name]
        assert stored[name], stored
        assert {m["agent_id"] for m in stored[name]} == {users[name].agent_id}
        assert {m["user_id"] for m in stored[name]} == {name}
    assert client.db is None  # the app's shutdown closed the factory's client


async def test_a_change_told_to_another_agent_supersedes_when_reads_are_user_wide(
    tmp_path: Path,
) -> None:
    """With every agent reading all of the user's memories, what one agent was
    told replaces what another agent's memory said, and back again."""
    factory = mem0_middleware_factory(
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(),
        folder=tmp_path / "data",
        mode="static_control",
        scope_search_by_agent=False,
    )
    async with factory.running():
        notes = []
        for agent, text, when in (
            ("planner", "I live in Hangzhou.", "2024-01-05T10:00:00+00:00"),
            ("helper", "I moved to Beijing.", "2024-03-10T10:00:00+00:00"),
            ("planner", "I live in Hangzhou.", "2024-06-01T10:00:00+00:00"),
        ):
            model = ScriptedChatModel("Ok.")
            agent_mws = await factory("alice", agent, "s")
            bot = Agent(name=agent, system_prompt="", model=model, middlewares=agent_mws)
            await bot.reply(UserMsg(name="user", content=text, created_at=when))
            assert await factory.flush(timeout=30)
            notes.append(note_text(model.calls[-1]))
        assert "Hangzhou" in notes[1]  # the helper was shown the planner's memory
        for agent in ("planner", "helper"):
            model = ScriptedChatModel("Ok.")
            bot = Agent(
                name=agent,
                system_prompt="",
                model=model,
                middlewares=await factory("alice", agent, "s"),
            )
            await bot.reply(UserMsg(name="user", content="Where do I live?"))
            note = note_text(model.calls[-1])
            assert "User lives in Hangzhou." in note and "Beijing" not in note, note
