"""Isolation is a security property: one user never reads, changes or deletes
another user's memories through this package, whatever the model writes.

Covered: the automatic path, tool calls with invented arguments, the factory's
user ids, mem0's wildcard, and 100 users at once on one shared client.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import re
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
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
from agentscope.state import AgentState
from agentscope.tool import Toolkit

from agentscope_mem0 import (
    DEFAULT_MEMORY_SECTION_HEADER,
    ConfigurationError,
    Mem0Middleware,
    build_mem0_config,
)
from agentscope_mem0.local import close_shared_clients, embedded_store_config
from agentscope_mem0.service import mem0_middleware_factory
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import RecordingClient, real_memory

# -- helpers ---------------------------------------------------------------


def _block_text(block: Any) -> str:
    if isinstance(block, str):
        return block
    if isinstance(block, TextBlock):
        return block.text
    if isinstance(block, HintBlock):
        return str(block.hint)
    if isinstance(block, ToolResultBlock):
        output = block.output if isinstance(block.output, list) else [block.output]
        return "\n".join(_block_text(b) for b in output)
    if isinstance(block, ToolCallBlock):
        return block.input
    return ""


def _seen(messages: Sequence[Msg]) -> str:
    """Everything a model call could read: text, notes, tool calls and results."""
    return "\n".join(
        _block_text(block)
        for msg in messages
        for block in (msg.content if isinstance(msg.content, list) else [msg.content])
    )


def _tool_results(state: AgentState) -> list[ToolResultBlock]:
    return [
        block
        for msg in state.context
        for block in (msg.content if isinstance(msg.content, list) else [])
        if isinstance(block, ToolResultBlock)
    ]


def _note(messages: Sequence[Msg]) -> str:
    for msg in messages:
        for block in msg.content if isinstance(msg.content, list) else []:
            if isinstance(block, HintBlock) and str(block.hint).startswith(
                DEFAULT_MEMORY_SECTION_HEADER
            ):
                return str(block.hint)
    return ""


def _call(name: str, arguments: dict[str, Any], call_id: str = "c1") -> list[ToolCallBlock]:
    return [ToolCallBlock(id=call_id, name=name, input=json.dumps(arguments))]


async def _two_users(store_config: dict[str, Any]) -> RecordingClient:
    """One store holding a secret of Alice and a secret of Bob, same agent name."""
    memory = real_memory(store_config)
    await memory.add(
        "Bob's bank PIN is 4321 and his secret word is zebracorn.",
        user_id="bob",
        agent_id="assistant",
        infer=False,
    )
    await memory.add(
        "Alice's secret word is lemonade.", user_id="alice", agent_id="assistant", infer=False
    )
    return RecordingClient(memory)


def _only_alice(client: RecordingClient) -> None:
    for name, args, kwargs in client.calls:
        scope = kwargs.get("filters") or kwargs
        assert scope.get("user_id") == "alice", (name, args, kwargs)
        assert "*" not in json.dumps(scope), (name, kwargs)
    assert {name for name, _, _ in client.calls} <= {"search", "add", "get_all"}


# -- the automatic path ------------------------------------------------------


async def test_automatic_search_never_returns_another_users_memory(
    store_config: dict[str, Any],
) -> None:
    client = await _two_users(store_config)
    model = ScriptedChatModel("Sorry, I cannot say.")
    mw = Mem0Middleware(user_id="alice", client=client, mode="static_control", top_k=50)
    agent = Agent(name="assistant", system_prompt="", model=model, middlewares=[mw])
    # The query repeats Bob's memory word for word: the closest vector is his.
    await agent.reply(
        UserMsg("user", "Bob's bank PIN is 4321 and his secret word is zebracorn. What is mine?")
    )
    assert await mw.flush(timeout=30)

    seen = _seen(model.calls[-1])
    assert "lemonade" in _note(model.calls[-1])
    assert "zebracorn" not in _note(model.calls[-1])
    assert "4321" not in seen.replace(
        "Bob's bank PIN is 4321 and his secret word is zebracorn. What is mine?", ""
    )
    _only_alice(client)
    bob = await client.inner.get_all(filters={"user_id": "bob"})
    assert [m["memory"] for m in bob["results"]] == [
        "Bob's bank PIN is 4321 and his secret word is zebracorn."
    ]


# -- tools: the model cannot choose the scope -------------------------------


def test_tools_expose_no_scope_argument_and_no_destructive_tool(
    store_config: dict[str, Any],
) -> None:
    mw = Mem0Middleware(user_id="alice", client=real_memory(store_config), mode="both")
    tools = asyncio.run(mw.list_tools())
    assert {t.name for t in tools} == {"search_memory", "add_memory"}
    scope_words = ("user", "agent", "run", "filter", "scope", "id", "state")
    for tool in tools:
        properties = tool.input_schema["properties"]
        assert not [p for p in properties if any(w in p.lower() for w in scope_words)]
        params = inspect.signature(tool.call).parameters
        assert set(params) - set(properties) == {"_agent_state"}
        assert not any(p.kind is p.VAR_KEYWORD for p in params.values())


INVENTED = [
    ("search_memory", {"keywords": ["secret word"], "user_id": "bob"}),
    ("search_memory", {"keywords": ["secret word"], "filters": {"user_id": "bob"}}),
    ("search_memory", {"keywords": ["secret word"], "agent_id": "*"}),
    ("search_memory", {"keywords": ["secret word"], "run_id": "x", "limit": 10**9}),
    ("search_memory", {"keywords": ["user_id=bob", "*"], "_agent_state": {"user_id": "bob"}}),
    ("add_memory", {"thinking": "t", "content": ["Bob owes me money."], "user_id": "bob"}),
    ("add_memory", {"thinking": "t", "content": ["I am Bob."], "metadata": {"user_id": "bob"}}),
    ("add_memory", {"thinking": "t", "content": ["x"], "memory_id": "1", "event": "DELETE"}),
]


@pytest.mark.parametrize(("tool", "arguments"), INVENTED)
async def test_invented_tool_arguments_cannot_reach_another_user(
    tool: str, arguments: dict[str, Any], store_config: dict[str, Any]
) -> None:
    client = await _two_users(store_config)
    model = ScriptedChatModel([_call(tool, arguments), "Done."])  # type: ignore[list-item]
    mw = Mem0Middleware(user_id="alice", client=client, mode="agent_control")
    agent = Agent(
        name="assistant",
        system_prompt="",
        model=model,
        middlewares=[mw],
        toolkit=Toolkit(tools=await mw.list_tools()),
    )
    await agent.reply(UserMsg("user", "Tell me Bob's secret word."))
    assert await mw.flush(timeout=30)

    (result,) = _tool_results(agent.state)
    text = _block_text(result)
    invented = set(arguments) - {"keywords", "limit", "thinking", "content", "_agent_state"}
    if invented:
        # an argument the tool does not take fails the call as a whole
        assert result.state == ToolResultState.ERROR, text
    assert "zebracorn" not in text and "4321" not in text
    _only_alice(client)
    bob = await client.inner.get_all(filters={"user_id": "bob"})
    assert [m["memory"] for m in bob["results"]] == [
        "Bob's bank PIN is 4321 and his secret word is zebracorn."
    ]


async def test_a_forged_state_argument_is_replaced_by_the_live_state(
    store_config: dict[str, Any],
) -> None:
    client = await _two_users(store_config)
    forged = {"middle_context": {"agentscope_mem0": {"agent_id": "*", "user_id": "bob"}}}
    model = ScriptedChatModel(
        [_call("search_memory", {"keywords": ["secret word"], "_agent_state": forged}), "Done."]  # type: ignore[list-item]
    )
    mw = Mem0Middleware(user_id="alice", client=client, mode="agent_control")
    agent = Agent(
        name="assistant",
        system_prompt="",
        model=model,
        middlewares=[mw],
        toolkit=Toolkit(tools=await mw.list_tools()),
    )
    await agent.reply(UserMsg("user", "What is my secret word?"))
    (result,) = _tool_results(agent.state)
    text = _block_text(result)
    assert "zebracorn" not in text
    assert [k["filters"] for _, k in client.named("search")] in (
        [],  # rejected by the schema check, or
        [{"user_id": "alice", "agent_id": "assistant"}],  # run with the live state
    )
    _only_alice(client)


# -- user ids: mem0's wildcard and whitespace --------------------------------


async def test_mem0_reads_every_user_for_a_wildcard_or_padded_id(
    store_config: dict[str, Any],
) -> None:
    # Why check_user_id exists: what mem0 2.2.1 does with such ids.
    client = await _two_users(store_config)
    everyone = await client.inner.search("secret word", filters={"user_id": "*"}, top_k=10)
    assert {m["user_id"] for m in everyone["results"]} == {"alice", "bob"}
    padded = await client.inner.search("secret word", filters={"user_id": " bob "}, top_k=10)
    assert {m["user_id"] for m in padded["results"]} == {"bob"}


@pytest.mark.parametrize("user_id", ["*", " bob", "bob ", "bob\n"])
async def test_factory_refuses_ids_that_would_reach_other_users(
    user_id: str, store_config: dict[str, Any]
) -> None:
    client = await _two_users(store_config)
    factory = mem0_middleware_factory(client=client)
    # No middleware, so the turn runs without memory (and gets its reply).
    assert await factory(user_id, "assistant", "s") == []
    assert client.calls == []


@pytest.mark.parametrize("user_id", ["*", " bob", "bob "])
def test_middleware_refuses_ids_that_would_reach_other_users(
    user_id: str, store_config: dict[str, Any]
) -> None:
    with pytest.raises(ConfigurationError):
        Mem0Middleware(user_id=user_id, client=real_memory(store_config))


# -- 100 users at once on one shared client ----------------------------------

USERS = 100
CANARY = re.compile(r"canary[0-9a-f]{12}")


def _user_script(canary: str) -> Callable[[list[Msg], Any], Any]:
    """Turn 1 states the canary; turn 2 stores it with add_memory; turn 3
    recalls it from the note and from search_memory."""
    steps: list[Any] = [
        "Noted.",
        _call("add_memory", {"thinking": "asked to", "content": [f"My code is {canary}."]}),
        "Saved.",
        _call("search_memory", {"keywords": ["secret word", "code"], "limit": 10}),
        None,  # the answer, built from what the agent was shown
    ]

    def reply(messages: list[Msg], tools: Any) -> Any:
        step = steps.pop(0)
        if step is not None:
            return step
        shown = _note(messages) + "\n" + _block_text(_tool_results_in(messages)[-1])
        return "Recalled: " + " ".join(sorted(set(CANARY.findall(shown))))

    return reply


def _tool_results_in(messages: Sequence[Msg]) -> list[ToolResultBlock]:
    return [
        block
        for msg in messages
        for block in (msg.content if isinstance(msg.content, list) else [])
        if isinstance(block, ToolResultBlock)
    ]


def _shared_store_config(tmp_path: Path, dims: int) -> dict[str, Any]:
    # The package's locked, process-wide local Qdrant client: the bare on-disk
    # client is not thread-safe under mem0's worker threads.
    config = embedded_store_config(dims=dims, folder=tmp_path / "shared")
    config["vector_store"]["config"]["collection_name"] = "t"
    return config


async def test_hundred_concurrent_users_only_ever_see_their_own_canary(
    tmp_path: Path,
) -> None:
    canaries = {f"user{i:03d}": f"canary{uuid.uuid4().hex[:12]}" for i in range(USERS)}
    extraction = ScriptedChatModel()
    embedding = HashEmbedding()
    config = build_mem0_config(
        chat_model=extraction,
        embedding_model=embedding,
        mem0_config=_shared_store_config(tmp_path, embedding.dimensions),
    )
    factory = mem0_middleware_factory(
        mem0_config=config, mode="both", parameters=Mem0Middleware.Parameters(search_timeout=60)
    )
    models = {user: ScriptedChatModel(_user_script(c)) for user, c in canaries.items()}
    states: dict[str, AgentState] = {}
    replies: dict[str, list[str]] = {user: [] for user in canaries}

    async def turn(user: str, text: str) -> None:
        # as agentscope.app does: a new middleware and agent per turn, state kept
        middlewares = await factory(user, "assistant", f"session-{user}")
        tools = [t for mw in middlewares for t in await mw.list_tools()]
        agent = Agent(
            name="assistant",
            system_prompt="",
            model=models[user],
            middlewares=middlewares,
            toolkit=Toolkit(tools=tools),
            state=states.get(user),
        )
        reply = await agent.reply(UserMsg("user", text))
        states[user] = agent.state
        replies[user].append(reply.get_text_content() or "")

    async def conversation(user: str) -> None:
        await turn(user, f"My secret word is {canaries[user]}.")
        await turn(user, "Please remember my code, it is the same as my secret word.")
        await turn(user, "What is my secret word?")

    started = time.perf_counter()
    await asyncio.gather(*(conversation(user) for user in canaries))
    assert await factory.flush(timeout=120)
    elapsed = time.perf_counter() - started

    for user, canary in canaries.items():
        assert replies[user][-1] == f"Recalled: {canary}", (user, replies[user])
        for reply in replies[user]:
            assert set(CANARY.findall(reply)) <= {canary}
        # every model call: notes, tool results, history
        for call in models[user].calls:
            assert set(CANARY.findall(_seen(call))) <= {canary}, user
        assert canary in _note(models[user].calls[-1])  # the automatic note
        results = _tool_results(states[user])
        assert [r.state for r in results] == [ToolResultState.SUCCESS] * 2
        assert all(set(CANARY.findall(_block_text(r))) <= {canary} for r in results)
        assert canary in _block_text(results[-1])

    # mem0's own extraction prompts include existing memories of one scope only
    assert len(extraction.extraction_calls) >= 2 * USERS
    for prompt in extraction.extraction_calls:
        assert len(set(CANARY.findall(_seen(prompt)))) <= 1

    client = factory.client
    for user, canary in list(canaries.items())[:: USERS // 10]:
        stored = (await client.get_all(filters={"user_id": user}, top_k=100))["results"]
        assert stored and all(set(CANARY.findall(m["memory"])) <= {canary} for m in stored)
    await factory.aclose()
    close_shared_clients(tmp_path / "shared")
    print(f"{USERS} users x 3 turns in {elapsed:.1f} s")
