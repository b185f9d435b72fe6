"""``agentscope-mem0 working``: what the middleware kept, seen and cleared from
the command line, on the embedded folder and on PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import ToolCallBlock, UserMsg
from agentscope.tool import Toolkit
from click.testing import CliRunner, Result

from _pgfixture import fresh_collection, postgres_dsn
from agentscope_mem0 import Mem0Middleware, PostgresWorkingStore, WorkingMemory
from agentscope_mem0.cli import cli
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


async def _turn(mw: Mem0Middleware, content: str, text: str = "hi") -> Agent:
    call = ToolCallBlock(
        id="w", name="update_working_memory", input=json.dumps({"content": content})
    )
    model = ScriptedChatModel([[call], "Ok."])  # type: ignore[list-item]
    agent = Agent(
        name="bot",
        system_prompt="",
        model=model,
        middlewares=[mw],
        toolkit=Toolkit(tools=await mw.list_tools()),
    )
    await agent.reply(UserMsg("user", text))
    return agent


async def test_shows_and_clears_what_the_agent_kept(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    options = WorkingMemory(scope="user", schema={"type": "object"})
    mw = Mem0Middleware.local(
        user_id="ann",
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(),
        folder=folder,
        parameters=Mem0Middleware.Parameters(working_memory=options),
    )
    await _turn(mw, '{"name": "Ann", "trip": {"to": "Oslo"}}')
    conv = Mem0Middleware(
        user_id="ann",
        client=mw.client,
        parameters=Mem0Middleware.Parameters(working_memory="conversation"),
    )
    agent = await _turn(conv, "Booked the 9:40 train.")
    session = agent.state.session_id

    shown = run("working", "--user", "ann", "--folder", str(folder))
    assert shown.exit_code == 0, shown.output
    assert '"to": "Oslo"' in shown.stdout and "version:" in shown.stdout
    assert session in shown.stderr  # the conversations that have their own
    data = json.loads(run("working", "-u", "ann", "--folder", str(folder), "--json").stdout)
    assert data["content"] == {"name": "Ann", "trip": {"to": "Oslo"}} and data["kind"] == "json"
    assert data["conversations"] == [session]
    one = run("working", "-u", "ann", "-c", session, "--folder", str(folder), "--json")
    assert json.loads(one.stdout)["content"] == "Booked the 9:40 train."

    cleared = run("working", "-u", "ann", "--folder", str(folder), "--clear")
    assert cleared.exit_code == 0 and "Cleared" in cleared.stdout
    # The agent sees it empty on its next turn.
    model = ScriptedChatModel("Ok.")
    bot = Agent(name="bot", system_prompt="", model=model, middlewares=[mw])
    await bot.reply(UserMsg("user", "again"))
    assert not any("Oslo" in str(m.content) for m in model.calls[0])
    # Clearing the conversation's copy reaches the agent's state too (newer version).
    run("working", "-u", "ann", "-c", session, "--folder", str(folder), "--clear")
    assert await conv._working.current(agent.state) == ""  # type: ignore[union-attr]

    missing = run("working", "-u", "nobody", "--folder", str(folder))
    assert missing.exit_code == 1 and "no working memory for user 'nobody'" in missing.stderr
    await mw.aclose()


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn() as dsn:
        yield dsn


def test_pgvector_config_reads_the_working_table(pg_dsn: str, tmp_path: Path) -> None:
    collection = fresh_collection("cli")
    store = PostgresWorkingStore(pg_dsn, table=f"{collection}_working")
    store.update("ann", "", lambda old: "Prefers aisle seats.", kind="text")
    store.close()
    config = tmp_path / "pg.toml"
    config.write_text(
        f'backend = "pgvector"\ndsn = "{pg_dsn}"\ncollection = "{collection}"\nfolder = "data"\n'
    )
    data: Any = json.loads(run("working", "-u", "ann", "--config", str(config), "--json").stdout)
    assert data["content"] == "Prefers aisle seats." and "PostgreSQL" in data["store"]


def test_qdrant_server_config_reads_the_working_collection(tmp_path: Path) -> None:
    """No Qdrant server runs here: the command's store for a Qdrant config is
    checked without connecting."""
    from agentscope_mem0 import QdrantWorkingStore
    from agentscope_mem0.cli._config import load_settings
    from agentscope_mem0.cli._working_memory import open_working_store

    config = tmp_path / "q.toml"
    config.write_text('backend = "qdrant"\nurl = "http://127.0.0.1:9"\ncollection = "mem"\n')
    store = open_working_store(load_settings(folder=None, config_path=str(config)))
    assert isinstance(store, QdrantWorkingStore) and store.collection == "mem_working"
    result = run("working", "-u", "ann", "--config", str(config))
    assert result.exit_code == 3, result.output  # unreachable, said so
