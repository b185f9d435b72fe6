"""The CLI shows the timeline: superseded memories hidden unless --all, history both ways."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import UserMsg

from agentscope_mem0 import Mem0Middleware
from agentscope_mem0.local import close_shared_clients
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from command_line import run, run_json


def _alices_middleware(folder: Path) -> Mem0Middleware:
    """alice's memory in ``folder``, written by the middleware alone (no tools)."""
    return Mem0Middleware.local(
        user_id="alice",
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(),
        folder=folder,
        mode="static_control",
    )


async def _two_sessions(folder: Path) -> None:
    mw = _alices_middleware(folder)
    async with mw:
        for text, when in (
            ("I live in Hangzhou.", "2024-01-05T10:00:00+00:00"),
            ("I moved to Beijing last month.", "2024-03-10T10:00:00+00:00"),
        ):
            bot = Agent(
                name="helper", system_prompt="x", model=ScriptedChatModel("Ok."), middlewares=[mw]
            )
            await bot.reply(UserMsg(name="user", content=text, created_at=when))
            await mw.flush()
    close_shared_clients(folder)


def test_list_search_and_history_follow_the_timeline(_data_dir: Path) -> None:
    data_dir = _data_dir
    asyncio.run(_two_sessions(data_dir))

    listed = run_json("list", "--user", "alice")
    assert [m["text"] for m in listed] == ["User moved to Beijing last month."]
    new: dict[str, Any] = listed[0]
    assert new["agentscope_mem0"]["event_date"] == "2024-02"
    assert new["agentscope_mem0"]["valid_from"].startswith("2024-03-10")

    everything = {m["text"]: m for m in run_json("list", "--user", "alice", "--all")}
    old = everything["User lives in Hangzhou."]
    assert old["agentscope_mem0"]["superseded_by"] == new["id"]
    assert old["agentscope_mem0"]["valid_until"] == "2024-02"  # the newer fact's event date
    table = run("list", "--user", "alice", "--all").stdout
    assert f"(superseded 2024-02 by {new['id']})" in table

    found = run_json("search", "--user", "alice", "where do I live")
    assert [m["text"] for m in found] == ["User moved to Beijing last month."]
    found_all = run_json("search", "--user", "alice", "--all", "where do I live")
    assert {m["text"] for m in found_all} == set(everything)

    # As of a date: what was current then, the superseded memory included.
    def as_of(day: str) -> list[str]:
        return [m["text"] for m in run_json("search", "--user", "alice", "--as-of", day, "live")]

    assert as_of("2023-12-31") == []
    assert as_of("2024-01-20") == ["User lives in Hangzhou."]
    assert as_of("2024-02-15") == ["User moved to Beijing last month."]  # true since 2024-02
    assert run("search", "--user", "alice", "--as-of", "someday", "live").exit_code == 2

    forward = run_json("history", old["id"])
    assert {"event": "SUPERSEDED_BY", "memory_id": new["id"]}.items() <= forward[-1].items()
    backward = run_json("history", new["id"])
    assert {"event": "SUPERSEDES", "memory_id": old["id"]}.items() <= backward[-1].items()
    # Why: the model's readings that decided the change, shown both ways.
    assert forward[-1]["reason"].startswith("model")
    assert backward[-1]["reason"] == forward[-1]["reason"]
    assert "WHY" in run("history", old["id"]).stdout

    # Forgetting the newer memory brings the older one back.
    assert run("forget", new["id"], "--yes").exit_code == 0
    assert [m["text"] for m in run_json("list", "--user", "alice")] == ["User lives in Hangzhou."]


async def _a_fact_said_twice(folder: Path) -> None:
    mw = _alices_middleware(folder)
    async with mw:
        for text in ("I live in Hangzhou.", "I live in Hangzhou!"):
            bot = Agent(
                name="helper", system_prompt="x", model=ScriptedChatModel("Ok."), middlewares=[mw]
            )
            await bot.reply(UserMsg(name="user", content=text))
            await mw.flush()
    close_shared_clients(folder)


def test_restore_undoes_a_wrong_change_and_history_shows_it(_data_dir: Path) -> None:
    asyncio.run(_two_sessions(_data_dir))
    everything = {m["text"]: m for m in run_json("list", "--user", "alice", "--all")}
    old = everything["User lives in Hangzhou."]
    new = everything["User moved to Beijing last month."]
    reason = old["agentscope_mem0"]["superseded_reason"]

    restored = run("restore", old["id"])
    assert restored.exit_code == 0, restored.output
    assert f"Current again: {old['id']}: User lives in Hangzhou." in restored.stdout
    assert f"It was superseded by {new['id']} ({reason})." in restored.stdout
    current = {m["text"]: m for m in run_json("list", "--user", "alice")}
    assert set(current) == set(everything)
    assert not current["User moved to Beijing last month."]["agentscope_mem0"].get("supersedes")
    undone = run_json("history", old["id"])[-1]
    assert undone["event"] == "RESTORED" and undone["memory_id"] == new["id"]
    assert undone["reason"] == f"was superseded ({reason})"
    # Nothing left to undo: a usage error that says so.
    again = run("restore", old["id"])
    assert again.exit_code == 2 and "nothing to restore" in again.output


def test_forgetting_the_kept_memory_forgets_its_repeat_too(_data_dir: Path) -> None:
    asyncio.run(_a_fact_said_twice(_data_dir))
    everything = run_json("list", "--user", "alice", "--all")
    kept = next(m for m in everything if not m["agentscope_mem0"].get("duplicate_of"))
    repeat = next(m for m in everything if m["agentscope_mem0"].get("duplicate_of"))
    assert repeat["agentscope_mem0"]["duplicate_of"] == kept["id"]
    assert [m["id"] for m in run_json("list", "--user", "alice")] == [kept["id"]]
    assert f"(duplicate of {kept['id']})" in run("list", "--user", "alice", "--all").stdout
    # history shows the chain both ways; export keeps the repeat with its marks.
    forward = run_json("history", repeat["id"])
    assert {"event": "DUPLICATE_OF", "memory_id": kept["id"]}.items() <= forward[-1].items()
    backward = run_json("history", kept["id"])
    assert {"event": "DUPLICATES", "memory_id": repeat["id"]}.items() <= backward[-1].items()
    assert forward[-1]["reason"] == backward[-1]["reason"]
    assert forward[-1]["reason"].startswith("words")
    exported = run("export", "--user", "alice")
    assert exported.exit_code == 0, exported.output
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    assert {line["id"]: line["agentscope_mem0"].get("duplicate_of") for line in lines} == {
        kept["id"]: None,
        repeat["id"]: kept["id"],
    }

    forgotten = run("forget", kept["id"], "--yes")
    assert forgotten.exit_code == 0, forgotten.output
    assert f"Forgot its repeat {repeat['id']}: {repeat['text']}" in forgotten.stdout
    assert "Current again" not in forgotten.stdout
    # Neither telling of the fact is left, nor its change history.
    assert run("list", "--user", "alice", "--all").exit_code == 1
    assert run("history", repeat["id"]).exit_code == 1


def test_forget_json_names_the_repeats_it_removed(_data_dir: Path) -> None:
    asyncio.run(_a_fact_said_twice(_data_dir))
    everything = run_json("list", "--user", "alice", "--all")
    kept = next(m for m in everything if not m["agentscope_mem0"].get("duplicate_of"))
    repeat = next(m for m in everything if m["agentscope_mem0"].get("duplicate_of"))
    report = run_json("forget", kept["id"], "--yes")
    assert report["ids"] == [kept["id"], repeat["id"]] and report["removed"] == 2
    assert report["current_again"] == []


@pytest.mark.parametrize(
    ("told", "stored"),
    [
        ("I live in Hangzhou.", "User lives in Hangzhou."),
        ("I moved back to Hangzhou.", "User moved back to Hangzhou."),
    ],
)
def test_a_fact_told_again_with_add_is_current_again(
    _data_dir: Path, told: str, stored: str
) -> None:
    """The agent's "moved to Beijing" superseded "lives in Hangzhou"; telling it
    again without an agent, as every agent's reads show, makes it current."""
    asyncio.run(_two_sessions(_data_dir))
    beijing = run_json("list", "--user", "alice")[0]

    added = run_json("add", "--user", "alice", told)["stored"]
    assert [m["text"] for m in added] == [stored]
    assert added[0]["agentscope_mem0"]["supersedes"] == [beijing["id"]]
    # An unrelated fact replaces nothing.
    assert "replaces" not in run("add", "--user", "alice", "I like tea.").stdout

    assert [m["text"] for m in run_json("list", "--user", "alice")] == ["User likes tea.", stored]
    everything = {m["id"]: m for m in run_json("list", "--user", "alice", "--all")}
    assert everything[beijing["id"]]["agentscope_mem0"]["superseded_by"] == added[0]["id"]


def test_add_without_an_agent_keeps_a_fact_only_one_agent_has(_data_dir: Path) -> None:
    """A fact only the planner's reads show is not the user's own yet: told to
    no agent it is stored, and it is not merged into the planner's memory."""
    planner = run_json("add", "--user", "alice", "--agent", "planner", "I live in Hangzhou.")
    added = run_json("add", "--user", "alice", "I live in Hangzhou.")["stored"]
    assert [m["text"] for m in added] == ["User lives in Hangzhou."]
    assert not added[0]["agentscope_mem0"].get("duplicate_of")
    assert added[0]["id"] != planner["stored"][0]["id"]
    # Told to the planner again, it is a repeat of what the planner's reads show.
    again = run_json("add", "--user", "alice", "--agent", "planner", "I live in Hangzhou!")
    assert again["stored"][0]["agentscope_mem0"]["duplicate_of"] in {
        planner["stored"][0]["id"],
        added[0]["id"],
    }
