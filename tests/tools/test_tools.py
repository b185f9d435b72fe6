"""search_memory / add_memory: schemas, scope from the live state, merge, fallback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import TextBlock, ToolCallBlock, ToolResultState, UserMsg
from agentscope.permission import PermissionBehavior, PermissionContext
from agentscope.state import AgentState
from agentscope.tool import Toolkit

from agentscope_mem0 import Mem0Middleware
from agentscope_mem0.testing import ScriptedChatModel
from fakes import RecordingClient, real_memory


def _text(chunk: Any) -> str:
    return "\n".join(b.text for b in chunk.content if isinstance(b, TextBlock))


async def _bound_agent(mw: Mem0Middleware, name: str = "assistant") -> Agent:
    agent = Agent(name=name, system_prompt="", model=ScriptedChatModel(), middlewares=[mw])
    await mw.on_system_prompt(agent, "")
    return agent


async def _tools(mw: Mem0Middleware) -> dict[str, Any]:
    return {t.name: t for t in await mw.list_tools()}


async def test_schemas_match_agentscope_builtin(store_config: dict[str, Any]) -> None:
    from agentscope.middleware import Mem0Middleware as BuiltIn

    ours = await _tools(Mem0Middleware(user_id="u", client=real_memory(store_config)))
    theirs = {
        t.name: t for t in await BuiltIn(user_id="u", client=RecordingClient(None)).list_tools()
    }
    assert set(ours) == set(theirs) == {"search_memory", "add_memory"}
    assert ours["add_memory"].input_schema == theirs["add_memory"].input_schema
    # search_memory takes one more keyword, optional: the built-in's calls are ours.
    search, builtin = ours["search_memory"].input_schema, theirs["search_memory"].input_schema
    assert set(search["properties"]) - set(builtin["properties"]) == {"as_of"}
    search_without = dict(search["properties"])
    search_without.pop("as_of")
    assert {**search, "properties": search_without} == builtin
    assert ours["search_memory"].is_read_only and ours["search_memory"].is_concurrency_safe
    assert not ours["add_memory"].is_read_only
    for tool in ours.values():
        assert tool.is_state_injected
        decision = await tool.check_permissions({}, PermissionContext())
        assert decision.behavior == PermissionBehavior.ALLOW


async def test_search_runs_one_query_per_keyword_and_merges(
    store_config: dict[str, Any],
) -> None:
    memory = real_memory(store_config)
    for fact in ("User lives in Hangzhou", "User likes dark mode charts", "User owns a cat"):
        await memory.add(fact, user_id="u", agent_id="assistant", infer=False)
    client = RecordingClient(memory)
    mw = Mem0Middleware(user_id="u", client=client, mode="agent_control")
    agent = await _bound_agent(mw)
    search = (await _tools(mw))["search_memory"]

    chunk = await search(
        keywords=["Hangzhou", "dark mode charts", "Hangzhou"], limit=2, _agent_state=agent.state
    )
    assert chunk.state == ToolResultState.SUCCESS
    lines = _text(chunk).splitlines()
    assert len(lines) == len(set(lines))
    assert "- User lives in Hangzhou" in lines
    assert "- User likes dark mode charts" in lines
    searches = client.named("search")
    assert [a[0] for a, _ in searches] == ["Hangzhou", "dark mode charts", "Hangzhou"]
    assert all(k["top_k"] == 2 for _, k in searches)
    assert all(k["filters"] == {"user_id": "u", "agent_id": "assistant"} for _, k in searches)


async def test_search_shows_memories_saying_the_same_thing_once(
    store_config: dict[str, Any],
) -> None:
    memory = real_memory(store_config)
    for fact in ("User moved to Beijing last month.", "The user moved to Beijing last month."):
        await memory.add(fact, user_id="u", agent_id="assistant", infer=False)
    mw = Mem0Middleware(user_id="u", client=memory, mode="agent_control")
    agent = await _bound_agent(mw)
    search = (await _tools(mw))["search_memory"]

    chunk = await search(keywords=["Beijing", "where the user lives"], _agent_state=agent.state)
    lines = _text(chunk).splitlines()
    assert len(lines) == 1
    assert "moved to Beijing last month" in lines[0]


async def test_search_without_keywords_is_an_error(store_config: dict[str, Any]) -> None:
    mw = Mem0Middleware(user_id="u", client=real_memory(store_config))
    agent = await _bound_agent(mw)
    chunk = await (await _tools(mw))["search_memory"](keywords=[" "], _agent_state=agent.state)
    assert chunk.state == ToolResultState.ERROR


async def test_add_sends_only_content_and_falls_back_to_verbatim(
    store_config: dict[str, Any],
) -> None:
    # an extractor that finds nothing, so the tool must store the text itself
    model = ScriptedChatModel(extractor=lambda exchange: [])
    client = RecordingClient(real_memory(store_config, chat_model=model))
    mw = Mem0Middleware(user_id="u", client=client, mode="agent_control")
    agent = await _bound_agent(mw, name="coder")
    add = (await _tools(mw))["add_memory"]

    chunk = await add(
        thinking="private reasoning",
        content=["Deploys on Fridays are banned."],
        _agent_state=agent.state,
    )
    assert chunk.state == ToolResultState.SUCCESS
    assert "private reasoning" in _text(chunk)
    adds = client.named("add")
    assert len(adds) == 2
    for (messages,), kwargs in adds:
        assert messages == [{"role": "user", "content": "Deploys on Fridays are banned."}]
        assert kwargs["user_id"] == "u" and kwargs["agent_id"] == "coder"
    assert "infer" not in adds[0][1]
    assert adds[1][1]["infer"] is False
    stored = await client.inner.get_all(filters={"user_id": "u", "agent_id": "coder"})
    assert [m["memory"] for m in stored["results"]] == ["Deploys on Fridays are banned."]
    assert "private reasoning" not in str(stored)


async def test_add_uses_extraction_when_it_finds_something(
    store_config: dict[str, Any],
) -> None:
    client = RecordingClient(real_memory(store_config))
    mw = Mem0Middleware(user_id="u", client=client, mode="agent_control")
    agent = await _bound_agent(mw)
    chunk = await (await _tools(mw))["add_memory"](
        thinking="", content=["I live in Hangzhou."], _agent_state=agent.state
    )
    assert chunk.state == ToolResultState.SUCCESS
    assert len(client.named("add")) == 1
    assert "User lives in Hangzhou." in _text(chunk)


async def test_empty_content_is_an_error(store_config: dict[str, Any]) -> None:
    client = RecordingClient(real_memory(store_config))
    mw = Mem0Middleware(user_id="u", client=client)
    agent = await _bound_agent(mw)
    chunk = await (await _tools(mw))["add_memory"](
        thinking="x", content=[], _agent_state=agent.state
    )
    assert chunk.state == ToolResultState.ERROR
    assert client.named("add") == []


@pytest.mark.parametrize("state", [None, AgentState()], ids=["no state", "a state never seen"])
async def test_tools_without_an_agent_state_act_for_the_middlewares_own_ids(
    state: AgentState | None, store_config: dict[str, Any]
) -> None:
    # As AgentScope's built-in does: a custom executor or a direct call brings
    # no live state, so the tools use the middleware's own user and agent_id.
    memory = real_memory(store_config)
    await memory.add("User lives in Hangzhou", user_id="u", agent_id="assistant", infer=False)
    await memory.add("User owns a cat", user_id="u", agent_id="other", infer=False)
    client = RecordingClient(memory)

    fixed = await _tools(Mem0Middleware(user_id="u", client=client, agent_id="assistant"))
    found = await fixed["search_memory"](keywords=["Hangzhou cat"], _agent_state=state)
    assert found.state == ToolResultState.SUCCESS
    assert "Hangzhou" in _text(found) and "cat" not in _text(found)
    added = await fixed["add_memory"](thinking="t", content=["I sing."], _agent_state=state)
    assert added.state == ToolResultState.SUCCESS, _text(added)
    assert client.named("add")[-1][1]["agent_id"] == "assistant"

    # agent_id taken from each agent's name: no agent to name, so the user alone
    by_name = await _tools(Mem0Middleware(user_id="u", client=client))
    found = await by_name["search_memory"](keywords=["Hangzhou cat"], _agent_state=state)
    assert "Hangzhou" in _text(found) and "cat" in _text(found)
    await by_name["add_memory"](thinking="t", content=["I dance."], _agent_state=state)
    assert "agent_id" not in client.named("add")[-1][1]
    assert client.named("add")[-1][1]["user_id"] == "u"


async def test_tools_follow_the_calling_agent_not_the_last_one(
    store_config: dict[str, Any],
) -> None:
    client = RecordingClient(real_memory(store_config))
    mw = Mem0Middleware(user_id="u", client=client, mode="agent_control")
    researcher = await _bound_agent(mw, "researcher")
    await _bound_agent(mw, "coder")  # replied last
    await (await _tools(mw))["add_memory"](
        thinking="", content=["I read papers on Mondays."], _agent_state=researcher.state
    )
    assert client.named("add")[0][1]["agent_id"] == "researcher"


@pytest.mark.parametrize("mode", ["agent_control", "both"])
async def test_agent_calls_the_tool_through_its_toolkit(
    mode: str, store_config: dict[str, Any]
) -> None:
    call = ToolCallBlock(
        id="c1",
        name="add_memory",
        input='{"thinking": "worth keeping", "content": ["I live in Hangzhou."]}',
    )
    model = ScriptedChatModel([[call], "Saved it."])  # type: ignore[list-item]
    client = RecordingClient(real_memory(store_config, chat_model=model))
    mw = Mem0Middleware(user_id="u", client=client, mode=mode)  # type: ignore[arg-type]
    agent = Agent(
        name="assistant",
        system_prompt="",
        model=model,
        middlewares=[mw],
        toolkit=Toolkit(tools=await mw.list_tools()),
    )
    reply = await agent.reply(UserMsg("user", "Remember that I live in Hangzhou."))
    await mw.flush()
    assert reply.get_text_content() == "Saved it."
    tool_adds = [k for (m,), k in client.named("add") if m[0]["content"] == "I live in Hangzhou."]
    assert tool_adds and tool_adds[0]["agent_id"] == "assistant"
    stored = await client.inner.get_all(filters={"user_id": "u"})
    assert any("Hangzhou" in m["memory"] for m in stored["results"])


async def _both_mode_turn(
    store_config: dict[str, Any], said: str, stored: list[str]
) -> tuple[ScriptedChatModel, list[str]]:
    """One reply in mode ``both`` whose model calls ``add_memory(stored)``; its
    model and every row the store holds afterwards (repeats and superseded too)."""
    call = ToolCallBlock(
        id="c1", name="add_memory", input=json.dumps({"thinking": "", "content": stored})
    )
    model = ScriptedChatModel([[call], "Saved it."])  # type: ignore[list-item]
    memory = real_memory(store_config, chat_model=model)
    mw = Mem0Middleware(user_id="u", client=memory, mode="both")
    agent = Agent(
        name="assistant",
        system_prompt="",
        model=model,
        middlewares=[mw],
        toolkit=Toolkit(tools=await mw.list_tools()),
    )
    await agent.reply(UserMsg("user", said))
    assert await mw.flush(30)
    points, _ = memory.vector_store.client.scroll(memory.vector_store.collection_name, limit=100)
    await mw.aclose()
    return model, [str(p.payload["data"]) for p in points]


async def test_both_mode_does_not_extract_again_what_add_memory_stored(
    store_config: dict[str, Any],
) -> None:
    model, rows = await _both_mode_turn(
        store_config, "Please remember that I live in Hangzhou.", ["I live in Hangzhou."]
    )
    assert len(model.extraction_calls) == 1  # the tool's write; the reply's is left out
    assert rows == ["User lives in Hangzhou."]


async def test_both_mode_still_writes_what_add_memory_left_out(
    store_config: dict[str, Any],
) -> None:
    model, rows = await _both_mode_turn(
        store_config, "I live in Hangzhou. I have a cat named Mochi.", ["I live in Hangzhou."]
    )
    assert len(model.extraction_calls) == 2
    assert any("Mochi" in row for row in rows) and any("Hangzhou" in row for row in rows)


async def test_what_add_memory_stored_outside_a_reply_never_skips_a_later_write(
    store_config: dict[str, Any],
) -> None:
    """add_memory called outside a reply (or in a reply that never ended) leaves its
    note in the agent's state; the next reply, saying the same, is written all the same."""
    model = ScriptedChatModel("Noted.")
    memory = real_memory(store_config, chat_model=model)
    mw = Mem0Middleware(user_id="u", client=memory, mode="both")
    agent = Agent(name="assistant", system_prompt="", model=model, middlewares=[mw])
    await mw.on_system_prompt(agent, "")
    added = await (await _tools(mw))["add_memory"](
        thinking="", content=["I live in Hangzhou."], _agent_state=agent.state
    )
    assert added.state == ToolResultState.SUCCESS
    await agent.reply(UserMsg("user", "I live in Hangzhou."))
    assert await mw.flush(30)
    assert len(model.extraction_calls) == 2  # the tool's write and the reply's
    await mw.aclose()


def test_a_reply_tells_beyond_the_stored_facts_by_any_content_word() -> None:
    from agentscope_mem0._reply import told_beyond

    stored = ["I live in Hangzhou.", "User lives in Hangzhou"]
    assert not told_beyond("Hi! Please remember: I live in Hangzhou.", stored)
    assert told_beyond("I no longer live in Hangzhou.", stored)
    assert told_beyond("I do not live in Hangzhou, note that.", ["User lives in Hangzhou"])
    assert told_beyond("I live in Hangzhou with my sister.", stored)
    assert told_beyond("我住在杭州。", stored)


async def test_tools_never_hang_on_a_slow_mem0(store_config: dict[str, Any]) -> None:
    import asyncio
    import time

    class Hung(RecordingClient):
        async def search(self, *a: Any, **k: Any) -> Any:
            await asyncio.sleep(30)

        async def add(self, *a: Any, **k: Any) -> Any:
            await asyncio.sleep(30)

    mw = Mem0Middleware(
        user_id="u",
        client=Hung(real_memory(store_config)),
        parameters=Mem0Middleware.Parameters(search_timeout=0.2, tool_timeout=0.2),
    )
    agent = await _bound_agent(mw)
    tools = await _tools(mw)
    started = time.perf_counter()
    found = await tools["search_memory"](keywords=["x"], _agent_state=agent.state)
    added = await tools["add_memory"](thinking="", content=["I am here."], _agent_state=agent.state)
    assert time.perf_counter() - started < 5
    assert found.state == ToolResultState.ERROR and "timed out" in _text(found)
    # The fact is recorded in the durable queue, and the answer says so.
    assert added.state == ToolResultState.SUCCESS and "Queued for memory" in _text(added)
    assert mw.stats()["writes_pending"] == 1
    assert mw._state.writer.outbox.counts() == {"pending": 1, "failed": 0}
    await mw.aclose(timeout=0)


async def test_add_memory_says_when_a_write_is_held_in_memory_only(
    store_config: dict[str, Any], tmp_path: Path
) -> None:
    """The outbox file cannot record (a full disk): the model is told the fact
    is not saved to disk yet, and the stats count it."""

    class Hung(RecordingClient):
        async def add(self, *a: Any, **k: Any) -> Any:
            await asyncio.sleep(30)

    mw = Mem0Middleware(
        user_id="u",
        client=Hung(real_memory(store_config)),
        parameters=Mem0Middleware.Parameters(tool_timeout=0.2, outbox=tmp_path),
    )
    agent = await _bound_agent(mw)
    tools = await _tools(mw)
    outbox = mw._state.writer.outbox
    ((pages,),) = outbox.read("PRAGMA page_count")
    outbox.read(f"PRAGMA max_page_count = {pages}")  # SQLITE_FULL from now on
    content = [f"I keep note {i:02d} with some words to fill pages. " * 400 for i in range(3)]
    added = await tools["add_memory"](thinking="", content=content, _agent_state=agent.state)
    assert added.state == ToolResultState.SUCCESS
    assert "kept in memory only" in _text(added) and "could not be saved to disk" in _text(added)
    assert mw.stats()["writes_in_memory_only"] == 1
    await mw.aclose(timeout=0)


async def test_fallback_keeps_each_fact_as_its_own_memory(store_config: dict[str, Any]) -> None:
    model = ScriptedChatModel(extractor=lambda exchange: [])
    memory = real_memory(store_config, chat_model=model)
    mw = Mem0Middleware(user_id="u", client=memory, mode="agent_control")
    agent = await _bound_agent(mw)
    chunk = await (await _tools(mw))["add_memory"](
        thinking="",
        content=["The user lives in Hangzhou.", "The user likes tea."],
        _agent_state=agent.state,
    )
    assert "Hangzhou; The user likes tea." in _text(chunk)
    stored = await memory.get_all(filters={"user_id": "u", "agent_id": "assistant"})
    assert sorted(m["memory"] for m in stored["results"]) == [
        "The user likes tea.",
        "The user lives in Hangzhou.",
    ]


async def test_tools_report_to_the_breaker_and_skip_mem0_while_it_is_open(
    store_config: dict[str, Any],
) -> None:
    import asyncio

    class HungSearch(RecordingClient):
        async def search(self, *a: Any, **k: Any) -> Any:
            self.calls.append(("search", a, k))
            await asyncio.sleep(30)

    client = HungSearch(real_memory(store_config))
    mw = Mem0Middleware(
        user_id="u",
        client=client,
        mode="agent_control",
        parameters=Mem0Middleware.Parameters(search_timeout=0.1, breaker_threshold=2),
    )
    agent = await _bound_agent(mw)
    tools = await _tools(mw)
    for _ in range(2):  # two timeouts open the breaker
        found = await tools["search_memory"](keywords=["x"], _agent_state=agent.state)
        assert "timed out" in _text(found)
    assert mw.stats()["breaker_state"] == "open"
    skipped = await tools["search_memory"](keywords=["x"], _agent_state=agent.state)
    assert skipped.state == ToolResultState.ERROR and "unavailable" in _text(skipped)
    assert len(client.named("search")) == 2  # the third was not sent to mem0
    assert mw.stats()["searches_skipped"] == 1


async def test_a_failing_store_never_tells_the_model_its_files(
    store_config: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    secret = "/srv/agent/data/edge/agentscope_mem0/segments/3fe/mutable_id_tracker.mappings"

    class Broken(RecordingClient):
        async def search(self, *a: Any, **k: Any) -> Any:
            raise OSError(f"IO Error: failed to open file `{secret}`")

        async def add(self, *a: Any, **k: Any) -> Any:
            raise OSError(f"IO Error: failed to open file `{secret}`")

        async def get(self, *a: Any, **k: Any) -> Any:
            raise OSError(f"IO Error: failed to open file `{secret}`")

    mw = Mem0Middleware(
        user_id="u",
        client=Broken(real_memory(store_config)),
        mode="agent_control",
        parameters=Mem0Middleware.Parameters(
            tools=("search_memory", "add_memory", "forget_memory")
        ),
    )
    agent = await _bound_agent(mw)
    tools = await _tools(mw)
    results = [
        await tools["search_memory"](keywords=["x"], _agent_state=agent.state),
        await tools["forget_memory"](memory_ids=["abc"], _agent_state=agent.state),
    ]
    for result in results:
        assert result.state == ToolResultState.ERROR
        assert "failed" in _text(result) and "/srv" not in _text(result), _text(result)
    assert secret in caplog.text  # the operator still finds it in the log
    await mw.aclose(timeout=0)
