"""Whoever opens closes: a middleware that built its mem0 client closes it in
``aclose()``, and the data folder is free for the command line, in this
process or another, once no other middleware of the process uses it. A client
passed in stays the caller's."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import UserMsg

from agentscope_mem0 import ConfigurationError, Mem0Middleware, Scope, build_local_memory
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from command_line import CLI_ENV, run_json


def _local(folder: Path, user: str = "alice", **options: Any) -> Mem0Middleware:
    return Mem0Middleware.local(
        user_id=user,
        chat_model=ScriptedChatModel("Noted."),
        embedding_model=HashEmbedding(),
        folder=folder,
        mode="static_control",
        await_write=True,
        **options,
    )


async def _say(mw: Mem0Middleware, text: str) -> Agent:
    agent = Agent(name="bot", system_prompt="", model=ScriptedChatModel("Noted."), middlewares=[mw])
    await agent.reply(UserMsg("user", text))
    return agent


def _cli_process(*args: str) -> subprocess.CompletedProcess[str]:
    """``agentscope-mem0 <args>`` as a process of its own, on the offline embedder."""
    env = {**os.environ, **{k: v for k, v in CLI_ENV.items() if v}}
    for name, value in CLI_ENV.items():
        if not value:
            env.pop(name, None)
    beside = Path(sys.executable).with_name("agentscope-mem0")
    script = str(beside) if beside.exists() else shutil.which("agentscope-mem0")
    assert script, "the agentscope-mem0 console script is not installed"
    return subprocess.run(
        [script, *args], capture_output=True, text=True, env=env, timeout=300, check=False
    )


@pytest.fixture(autouse=True)
def _offline_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in CLI_ENV.items():
        if value:
            monkeypatch.setenv(name, value)
        else:
            monkeypatch.delenv(name, raising=False)


def test_the_cli_opens_the_folder_right_after_the_middleware_closed(tmp_path: Path) -> None:
    folder = tmp_path / "data"

    async def session() -> None:
        # A middleware that fails to build closes the client it built, too.
        with pytest.raises(ConfigurationError, match="judge_model"):
            _local(
                folder,
                judge_model=ScriptedChatModel(),
                parameters=Mem0Middleware.Parameters(judge=False),
            )
        async with _local(folder) as mw:
            await _say(mw, "I live in Oslo.")

    asyncio.run(session())
    # In this process: the command opens the folder and hands it back.
    listed = run_json("list", "--folder", str(folder), "--user", "alice")
    assert [m["text"] for m in listed] == ["User lives in Oslo."]
    # In another process: the folder is not "in use by another process".
    child = _cli_process("list", "--folder", str(folder), "--user", "alice", "--json")
    assert child.returncode == 0, child.stderr
    assert "User lives in Oslo." in child.stdout


async def test_closing_one_of_two_middlewares_on_a_folder_keeps_the_other_working(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "data"
    first, second = _local(folder, "alice"), _local(folder, "bob")
    await _say(first, "I like tea.")
    await first.aclose()

    await _say(second, "I live in Lima.")
    asked = await _say(second, "Where do I live?")  # recalls through the shared store
    assert any("User lives in Lima." in str(msg.content) for msg in asked.state.context)
    stored = await second.client_state.backend.get_all(Scope("bob", "bot"), limit=10)
    assert [hit.memory for hit in stored] == ["User lives in Lima."]
    # The folder is free once the second one closed too.
    await second.aclose()
    free = _cli_process("list", "--folder", str(folder), "--user", "bob", "--json")
    assert free.returncode == 0, free.stderr
    assert "User lives in Lima." in free.stdout


async def test_a_middleware_built_from_models_closes_its_client(
    tmp_path: Path, _data_dir: Path
) -> None:
    mw = Mem0Middleware(
        user_id="alice",
        chat_model=ScriptedChatModel("Noted."),
        embedding_model=HashEmbedding(),
        mode="static_control",
        await_write=True,
    )
    await _say(mw, "I have a cat.")
    await mw.aclose()
    # The default data folder (AGENTSCOPE_MEM0_DIR) is free for another process.
    child = _cli_process("list", "--folder", str(_data_dir), "--user", "alice", "--json")
    assert child.returncode == 0, child.stderr
    assert "User has a cat." in child.stdout


async def test_a_client_passed_in_stays_the_callers(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    memory = build_local_memory(
        ScriptedChatModel("Noted."), embedding_model=HashEmbedding(), folder=folder
    )
    async with Mem0Middleware(
        user_id="alice", client=memory, mode="static_control", await_write=True
    ) as mw:
        await _say(mw, "I like jazz.")
    # Still open and usable after the middleware closed.
    found = await memory.search("jazz", filters={"user_id": "alice"}, top_k=3)
    assert [entry["memory"] for entry in found["results"]] == ["User likes jazz."]
