"""One middleware shared by several agents of one user: each agent keeps its own
scope under concurrency, or, with ``scope_search_by_agent=False``, they share
what they learned about the user."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agentscope.agent import Agent
from agentscope.message import (
    HintBlock,
    Msg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolResultState,
    UserMsg,
)
from agentscope.tool import Toolkit

from agentscope_mem0 import Mem0Middleware
from agentscope_mem0.testing import ScriptedChatModel
from fakes import RecordingClient, real_memory

AGENTS = ("researcher", "coder")
ROUNDS = 4


def _block_text(block: Any) -> str:
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, HintBlock):
        return str(block.hint)
    if isinstance(block, ToolResultBlock):
        output = block.output if isinstance(block.output, list) else [block.output]
        return "\n".join(_block_text(b) if not isinstance(b, str) else b for b in output)
    return ""


def _texts(msg: Msg) -> list[str]:
    """Every text the model can read in ``msg``: text, hints and tool results."""
    return [_block_text(b) for b in (msg.content if isinstance(msg.content, list) else [])]


def _tool_results(agent: Agent) -> list[tuple[str, str, ToolResultState]]:
    return [
        (block.name, _block_text(block), block.state)
        for msg in agent.state.context
        for block in (msg.content if isinstance(msg.content, list) else [])
        if isinstance(block, ToolResultBlock)
    ]


def _call(name: str, arguments: dict[str, Any], call_id: str) -> list[ToolCallBlock]:
    return [ToolCallBlock(id=call_id, name=name, input=json.dumps(arguments))]


def _script(agent: str) -> list[Any]:
    """Per round: store a fact with add_memory, look with search_memory, answer."""
    script: list[Any] = []
    for r in range(ROUNDS):
        script += [
            _call(
                "add_memory",
                {"thinking": "durable", "content": [f"I trust {agent} tool{r} for work."]},
                f"{agent}-add-{r}",
            ),
            _call("search_memory", {"keywords": [f"{agent} tool"], "limit": 20}, f"{agent}-s-{r}"),
            f"{agent} done with round {r}.",
        ]
    return script


async def _run_two_agents(mw: Mem0Middleware) -> dict[str, Agent]:
    agents = {
        name: Agent(
            name=name,
            system_prompt=f"You are the {name}.",
            model=ScriptedChatModel(_script(name), delay=0.01),
            middlewares=[mw],
            toolkit=Toolkit(tools=await mw.list_tools()),
        )
        for name in AGENTS
    }

    async def converse(name: str) -> None:
        for r in range(ROUNDS):
            reply = await agents[name].reply(UserMsg("user", f"I use {name} kit{r} at home."))
            assert reply.get_text_content() == f"{name} done with round {r}."

    await asyncio.gather(*(converse(name) for name in AGENTS))
    assert await mw.flush(timeout=60)
    return agents


def _reply_searches(client: RecordingClient) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    """The searches of the replies and the tools, by their queries (the background
    consolidation after each write searches with stored memory texts)."""
    return [
        (args, kwargs)
        for args, kwargs in client.named("search")
        if args[0].startswith("I use ") or args[0].endswith(" tool")
    ]


def _owner(text: str) -> str:
    (owner,) = [name for name in AGENTS if name in text]
    return owner


async def test_concurrent_agents_on_one_middleware_write_and_search_their_own_scope(
    store_config: dict[str, Any],
) -> None:
    client = RecordingClient(real_memory(store_config))
    mw = Mem0Middleware(user_id="alice", client=client, mode="both")
    agents = await _run_two_agents(mw)

    adds = client.named("add")
    # per agent and round: one automatic write and one add_memory
    assert len(adds) >= 2 * len(AGENTS) * ROUNDS
    for (messages,), kwargs in adds:
        text = " ".join(m["content"] for m in messages)
        assert kwargs["user_id"] == "alice"
        assert kwargs["agent_id"] == _owner(text), (text, kwargs)

    searches = _reply_searches(client)
    assert len(searches) == 2 * len(AGENTS) * ROUNDS  # automatic + tool, per turn
    for (query,), kwargs in searches:
        assert kwargs["filters"] == {"user_id": "alice", "agent_id": _owner(query)}

    stored = (await client.inner.get_all(filters={"user_id": "alice"}, top_k=500))["results"]
    assert len(stored) >= 2 * len(AGENTS) * ROUNDS
    for memory in stored:
        assert memory["agent_id"] == _owner(memory["memory"]), memory

    for name, agent in agents.items():
        results = _tool_results(agent)
        assert [n for n, _, _ in results].count("add_memory") == ROUNDS
        assert all(state == ToolResultState.SUCCESS for _, _, state in results)
        (other,) = set(AGENTS) - {name}
        seen = "\n".join(text for _, text, _ in results)
        assert f"{name} tool" in seen and other not in seen
        for call in agent.model.calls:
            assert not any(other in t for msg in call for t in _texts(msg))


async def test_agents_share_what_they_learned_about_the_user_when_not_scoped_by_agent(
    store_config: dict[str, Any],
) -> None:
    client = RecordingClient(real_memory(store_config))
    mw = Mem0Middleware(user_id="alice", client=client, scope_search_by_agent=False)
    agents = await _run_two_agents(mw)

    # writes still carry the writer's id ...
    for (messages,), kwargs in client.named("add"):
        assert kwargs["agent_id"] == _owner(" ".join(m["content"] for m in messages))
    # ... while searches cover everything about the user
    assert {json.dumps(k["filters"]) for _, k in _reply_searches(client)} == {
        json.dumps({"user_id": "alice"})
    }
    for name, agent in agents.items():
        (other,) = set(AGENTS) - {name}
        seen = "\n".join(text for _, text, _ in _tool_results(agent))
        assert f"{other} tool" in seen or f"{other} kit" in seen


async def test_the_tool_scope_follows_the_calling_agents_state_not_the_last_bound_agent(
    store_config: dict[str, Any],
) -> None:
    client = RecordingClient(real_memory(store_config))
    mw = Mem0Middleware(user_id="alice", client=client, mode="agent_control")
    agents = {
        name: Agent(name=name, system_prompt="", model=ScriptedChatModel(), middlewares=[mw])
        for name in AGENTS
    }
    for agent in agents.values():
        await mw.on_system_prompt(agent, "")  # the coder is bound last
    tools = {t.name: t for t in await mw.list_tools()}

    await tools["add_memory"](
        thinking="t", content=["I trust researcher notes."], _agent_state=agents["researcher"].state
    )
    await tools["search_memory"](keywords=["notes"], _agent_state=agents["researcher"].state)
    (_, add_kwargs) = client.named("add")[0]
    (_, search_kwargs) = client.named("search")[0]
    assert add_kwargs["agent_id"] == "researcher"
    assert search_kwargs["filters"] == {"user_id": "alice", "agent_id": "researcher"}
