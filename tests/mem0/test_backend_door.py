"""One door to mem0: no module but ``_mem0/backend.py`` calls a mem0 client.

Checked twice: statically (no call of a mem0 method on a client-like object
anywhere else in the package) and at run time (mem0's client classes are
patched so that every call records the file it came from, while the
middleware, its tools, the writer and the command line do their work).
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mem0
import pytest
from agentscope.agent import Agent
from agentscope.message import UserMsg
from click.testing import CliRunner

import agentscope_mem0
from agentscope_mem0 import Mem0Middleware
from agentscope_mem0.testing import ScriptedChatModel
from fakes import real_memory

PACKAGE = Path(agentscope_mem0.__file__).resolve().parent
DOOR = PACKAGE / "_mem0" / "backend.py"
# The package's own AsyncMemory: its methods call mem0's through super(), as the client itself.
CLIENT_CLASS = PACKAGE / "_mem0" / "async_memory.py"
MEM0_METHODS = ("add", "search", "get_all", "get", "update", "delete", "delete_all", "history")


@pytest.fixture
def door(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every call of a mem0 client method made from package code outside the door."""
    strays: list[str] = []
    for cls in (mem0.AsyncMemory, mem0.AsyncMemoryClient):
        for name in MEM0_METHODS:
            original = getattr(cls, name, None)
            if original is not None:
                monkeypatch.setattr(cls, name, _guarded(original, name, strays))
    yield strays


def _guarded(original: Any, name: str, strays: list[str]) -> Any:
    @functools.wraps(original)  # keeps __wrapped__, so the client still reads as async
    def guarded(self: Any, *args: Any, **kwargs: Any) -> Any:
        caller = sys._getframe(1)
        path = Path(caller.f_code.co_filename).resolve()
        if path.is_relative_to(PACKAGE) and path not in (DOOR, CLIENT_CLASS):
            strays.append(f"{name}() from {path.relative_to(PACKAGE)}:{caller.f_lineno}")
        return original(self, *args, **kwargs)

    return guarded


def test_no_module_but_the_backend_calls_a_mem0_method() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == DOOR:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            if isinstance(func, ast.Attribute) and func.attr in MEM0_METHODS:
                target = ast.unparse(func.value).lower()
                if target.endswith(("client", "memory", "mem0")):
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {ast.unparse(func)}")
            # getattr(client, "search") hands the method out, which is a call in waiting
            if isinstance(func, ast.Name) and func.id == "getattr" and len(node.args) >= 2:
                name = node.args[1]
                handed_out = isinstance(name, ast.Constant) and name.value in MEM0_METHODS
                # resolve_client only inspects the methods, to refuse a sync client
                if handed_out and path != PACKAGE / "_mem0" / "clients.py":
                    found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert found == []


def test_the_guard_catches_a_call_from_package_code(
    door: list[str], store_config: dict[str, Any]
) -> None:
    memory = real_memory(store_config)
    stray = compile("memory.get_all(filters={'user_id': 'u'})", str(PACKAGE / "_x.py"), "eval")
    coroutine = eval(stray, {"memory": memory})
    coroutine.close()
    assert door == ["get_all() from _x.py:1"]


async def test_replies_tools_and_writes_go_through_the_backend(
    door: list[str], store_config: dict[str, Any]
) -> None:
    memory = real_memory(store_config)
    mw = Mem0Middleware(
        user_id="alice",
        client=memory,
        parameters=Mem0Middleware.Parameters(
            recall="full", tools=("search_memory", "add_memory", "forget_memory")
        ),
    )
    agent = Agent(name="helper", system_prompt="", model=ScriptedChatModel("Ok."), middlewares=[mw])
    await agent.reply(UserMsg("user", "I live in Hangzhou and I like green tea."))
    assert await mw.flush(timeout=30)
    await agent.reply(UserMsg("user", "Where do I live?"))
    tools = {tool.name: tool for tool in await mw.list_tools()}
    await tools["add_memory"](thinking="", content=["I play the piano."], _agent_state=agent.state)
    assert await mw.flush(timeout=30)
    found = await tools["search_memory"](keywords=["piano"], _agent_state=agent.state)
    assert "piano" in str(found.content)
    stored = (await memory.get_all(filters={"user_id": "alice"}))["results"]
    await tools["forget_memory"](memory_ids=[stored[0]["id"]], _agent_state=agent.state)
    assert await mw.aclose(timeout=30)
    assert door == []


def test_the_command_line_goes_through_the_backend(
    door: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentscope_mem0.cli import cli

    monkeypatch.setenv("AGENTSCOPE_MEM0_EMBEDDER", "hash")
    for name in (
        "DASHSCOPE_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "AGENTSCOPE_MEM0_CONFIG",
    ):
        monkeypatch.delenv(name, raising=False)

    def run(*args: str) -> str:
        result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
        assert result.exit_code == 0, result.output
        return result.stdout

    run("add", "--user", "kim", "--raw", "likes tea", "--agent", "bot")
    run("list", "--user", "kim")
    run("search", "--user", "kim", "--agent", "bot", "tea")
    memory_id = run("list", "--user", "kim", "--json").split('"id": "')[1].split('"')[0]
    run("history", memory_id)
    run("forget", memory_id, "--yes")
    assert door == []
