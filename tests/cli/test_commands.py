"""The ``agentscope-mem0`` command on a real embedded store in tmp_path.

Every command runs through click's runner on the real group (and, at the
end, as a real process). mem0, the local Qdrant store and the history
database are real; the embedder is :class:`HashEmbedding` (chosen with the
``AGENTSCOPE_MEM0_EMBEDDER=hash`` test hook) and extraction is the offline
rule-based model.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from command_line import CLI_ENV, add_raw, run, run_json


def test_help_lists_every_command() -> None:
    result = run("--help")
    assert result.exit_code == 0
    for name in (
        "demo",
        "list",
        "search",
        "add",
        "forget",
        "history",
        "export",
        "import",
        "status",
        "retry-failed",
    ):
        assert f"  {name} " in result.stdout
    assert "Exit codes" in result.stdout


def test_add_extracts_with_the_offline_model_and_says_so() -> None:
    result = run("add", "--user", "alice", "I live in Hangzhou. The weather is nice.")
    assert result.exit_code == 0, result.output
    assert "offline rule-based extractor" in result.stderr
    assert "User lives in Hangzhou." in result.stdout
    assert "weather" not in result.stdout  # not about the user: not kept

    listed = run_json("list", "--user", "alice")
    assert [m["text"] for m in listed] == ["User lives in Hangzhou."]
    assert listed[0]["user_id"] == "alice"


def test_add_raw_stores_verbatim_with_agent() -> None:
    added = run_json("add", "--user", "alice", "--agent", "planner", "--raw", "likes tea")
    assert added["extraction_model"] is None
    [memory] = added["stored"]
    assert memory["text"] == "likes tea"
    # The package's own fields apart from the user's metadata (there is none here).
    assert {"said_at", "valid_from"} <= set(memory["agentscope_mem0"])
    assert "metadata" not in memory
    listed = run_json("list", "--user", "alice", "--agent", "planner")
    assert listed[0]["agent_id"] == "planner"
    assert listed[0]["created_at"] == listed[0]["updated_at"]


def test_an_agent_name_with_spaces_reads_what_that_agent_stored() -> None:
    """``--agent "Research Assistant"`` is the id the middleware gives that agent."""
    run_json("add", "--user", "alice", "--agent", "Research_Assistant", "--raw", "likes tea")
    listed = run_json("list", "--user", "alice", "--agent", "Research  Assistant")
    assert [(m["text"], m["agent_id"]) for m in listed] == [("likes tea", "Research_Assistant")]


def test_add_that_extracts_nothing_exits_1() -> None:
    result = run("add", "--user", "alice", "The sky is blue.")
    assert result.exit_code == 1
    assert "nothing was stored" in result.stderr
    assert "--raw" in result.stderr


def test_list_table_newest_first_with_limit() -> None:
    first = add_raw("alice", "first fact")
    second = add_raw("alice", "second fact", "--agent", "bot")
    add_raw("bob", "bob's fact")

    result = run("list", "--user", "alice")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["ID", "AGENT", "CREATED", "UPDATED", "MEMORY"]
    assert lines[1].startswith(second) and " bot " in lines[1]
    assert lines[2].startswith(first)
    assert "bob" not in result.stdout
    assert "2 memories of user 'alice'" in result.stderr

    limited = run_json("list", "--user", "alice", "--limit", "1")
    assert [m["id"] for m in limited] == [second]
    assert run_json("list", "--user", "alice", "--agent", "bot")[0]["id"] == second


def test_search_returns_scores_best_first() -> None:
    add_raw("alice", "User lives in Hangzhou")
    add_raw("alice", "User likes dark mode charts")
    hits = run_json("search", "--user", "alice", "dark mode charts", "--top-k", "2")
    assert hits[0]["text"] == "User likes dark mode charts"
    assert hits[0]["score"] >= hits[1]["score"]

    table = run("search", "--user", "alice", "where does the user live", "-k", "1")
    assert table.exit_code == 0
    assert table.stdout.splitlines()[0].split()[:2] == ["SCORE", "ID"]
    assert len(table.stdout.splitlines()) == 2


def test_a_threshold_or_timeout_that_is_no_number_in_range_is_refused() -> None:
    add_raw("alice", "User lives in Hangzhou")
    for value in ("nan", "NaN", "inf", "-inf", "-0.5", "1.5"):
        result = run("search", "--user", "alice", "Hangzhou", "--threshold", value)
        assert result.exit_code == 2, (value, result.output)
        assert "--threshold" in result.stderr
    assert run("search", "--user", "alice", "Hangzhou", "--threshold", "0").exit_code == 0
    for value in ("nan", "inf"):
        result = run("retry-failed", "--timeout", value)
        assert result.exit_code == 2 and "--timeout" in result.stderr, value


def test_a_user_without_memories_is_a_clear_error() -> None:
    add_raw("alice", "something")
    for args in (
        ("list", "--user", "bob"),
        ("search", "--user", "bob", "anything"),
        ("export", "--user", "bob"),
        ("forget", "--user", "bob", "--all", "--yes"),
    ):
        result = run(*args)
        assert result.exit_code == 1, args
        assert "no memories for user 'bob'" in result.stderr
        assert result.stdout == ""


def test_bad_user_ids_are_usage_errors() -> None:
    for user in ("*", " alice", " "):
        result = run("list", "--user", user)
        assert result.exit_code == 2, user
    assert "--user" in run("list").stderr  # missing option


def test_unknown_and_malformed_ids() -> None:
    add_raw("alice", "something")
    unknown = "00000000-0000-4000-8000-000000000000"
    for args in (("forget", unknown, "--yes"), ("history", unknown)):
        result = run(*args)
        assert result.exit_code == 1, args
        assert unknown in result.stderr
    for args in (("forget", "nope", "--yes"), ("history", "nope")):
        result = run(*args)
        assert result.exit_code == 2, args
        assert "not a memory id" in result.stderr


def test_history_shows_mem0_changes() -> None:
    memory_id = add_raw("alice", "likes tea")
    entries = run_json("history", memory_id)
    assert [(e["event"], e["new_memory"]) for e in entries] == [("ADD", "likes tea")]
    table = run("history", memory_id)
    assert table.stdout.splitlines()[0].split() == ["WHEN", "EVENT", "BEFORE", "AFTER", "WHY"]
    assert "ADD" in table.stdout


def test_forget_one_asks_and_verifies(data_dir: Path) -> None:
    keep = add_raw("alice", "keep me")
    memory_id = add_raw("alice", "forget me")

    declined = run("forget", memory_id, input="n\n")
    assert declined.exit_code == 0  # answering no is not a failure
    assert "forget me" in declined.stderr  # the prompt shows the text
    assert "aborted" in declined.stderr
    assert len(run_json("list", "--user", "alice")) == 2

    done = run("forget", memory_id, input="y\n")
    assert done.exit_code == 0, done.output
    assert "Verified: it is gone" in done.stdout
    assert [m["id"] for m in run_json("list", "--user", "alice")] == [keep]
    # The change history held the text; it is gone too.
    assert _history_rows(data_dir, memory_id) == 0
    assert run("history", memory_id).exit_code == 1


def test_forget_one_keep_history() -> None:
    memory_id = add_raw("alice", "forget me")
    report = run_json("forget", memory_id, "--yes", "--keep-history")
    assert report == {
        "removed": 1,
        "remaining": 0,
        "ids": [memory_id],
        "history_entries_removed": 0,
        "current_again": [],
    }
    events = [e["event"] for e in run_json("history", memory_id)]
    assert events == ["ADD", "DELETE"]


def test_forget_all_of_a_user(data_dir: Path) -> None:
    ids = [add_raw("alice", f"fact {i}") for i in range(3)]
    # An extraction keeps the conversation in mem0's messages table.
    assert run("add", "--user", "alice", "I like green tea.").exit_code == 0
    bob = add_raw("bob", "bob's fact")

    declined = run("forget", "--user", "alice", "--all", input="n\n")
    assert declined.exit_code == 0
    assert "Forget all 4 memories of user 'alice'" in declined.stderr
    assert "aborted; nothing was forgotten" in declined.stderr

    report = run_json("forget", "--user", "alice", "--all", "--yes")
    assert report["removed"] == 4
    assert report["remaining"] == 0
    assert set(ids) <= set(report["ids"])
    assert report["history_entries_removed"] >= 8  # an ADD and a DELETE each
    assert report["messages_removed"] >= 1
    assert run("list", "--user", "alice").exit_code == 1
    assert [m["id"] for m in run_json("list", "--user", "bob")] == [bob]
    assert all(_history_rows(data_dir, i) == 0 for i in ids)
    assert _messages_mentioning(data_dir, "green tea") == 0


def test_forget_says_one_memory_and_needs_yes_without_input() -> None:
    add_raw("alice", "the only fact")
    no_input = run("forget", "--user", "alice", "--all")
    assert no_input.exit_code == 2
    assert "--yes" in no_input.stderr
    assert len(run_json("list", "--user", "alice")) == 1

    declined = run("forget", "--user", "alice", "--all", input="n\n")
    assert "Forget the only memory of user 'alice'" in declined.stderr
    done = run("forget", "--user", "alice", "--all", "--yes")
    assert done.exit_code == 0
    assert "Forgot 1 memory of user 'alice'." in done.stdout


def test_empty_json_listings_print_an_empty_list() -> None:
    add_raw("somebody", "something")
    for args in (("list", "--user", "nobody"), ("search", "--user", "nobody", "tea")):
        result = run(*args, "--json")
        assert result.exit_code == 1, args  # none found, as without --json
        assert json.loads(result.stdout) == []
        assert "no memories for user 'nobody'" in result.stderr


def test_add_help_says_agent_names_the_writer() -> None:
    text = run("add", "--help").stdout
    assert "Store the memory under this agent id" in text
    assert "Only memories of this agent" in run("list", "--help").stdout


def test_forget_all_of_one_agent_only() -> None:
    add_raw("alice", "agent a fact", "--agent", "a")
    other = add_raw("alice", "agent b fact", "--agent", "b")
    result = run("forget", "--user", "alice", "--agent", "a", "--all", "--yes")
    assert result.exit_code == 0, result.output
    assert "Forgot 1 memory of user 'alice' and agent 'a'" in result.stdout
    assert "Verified: none remain" in result.stdout
    assert [m["id"] for m in run_json("list", "--user", "alice")] == [other]


def test_forget_usage_errors() -> None:
    memory_id = add_raw("alice", "x")
    for args in (
        ("forget",),
        ("forget", "--user", "alice"),
        ("forget", memory_id, "--user", "alice"),
        ("forget", "--all", "--yes"),
    ):
        result = run(*args)
        assert result.exit_code == 2, args
    assert len(run_json("list", "--user", "alice")) == 1


def test_run_inside_a_process_that_holds_the_folder(data_dir: Path) -> None:
    """Called from Python in an app that has the folder open, the command
    shares that process's client and leaves it open."""
    from agentscope_mem0 import build_local_memory
    from agentscope_mem0.local import close_shared_clients
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    memory = build_local_memory(
        ScriptedChatModel("OK."), embedding_model=HashEmbedding(), folder=data_dir
    )
    try:
        asyncio.run(memory.add("likes tea", user_id="kim", infer=False))
        assert [m["text"] for m in run_json("list", "--user", "kim")] == ["likes tea"]
        assert run_json("status")["backend"]["memories"] == 1
        listed = asyncio.run(memory.get_all(filters={"user_id": "kim"}))
        assert [m["memory"] for m in listed["results"]] == ["likes tea"]
    finally:
        memory.close()
        close_shared_clients(data_dir)


def test_demo_command_is_kept() -> None:
    result = run("demo", "--help")
    assert result.exit_code == 0
    assert "--mode" in result.stdout


def test_real_process_entry_points(tmp_path: Path) -> None:
    env = {**os.environ, **{k: v for k, v in CLI_ENV.items() if v}}
    for name in ("DASHSCOPE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(name, None)
    folder = str(tmp_path / "proc")
    added = subprocess.run(
        [sys.executable, "-m", "agentscope_mem0.cli", "add", "--folder", folder,
         "--user", "carol", "--raw", "likes jazz", "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    memory_id = json.loads(added.stdout)["stored"][0]["id"]

    beside = Path(sys.executable).with_name("agentscope-mem0")
    script = str(beside) if beside.exists() else shutil.which("agentscope-mem0")
    assert script, "the agentscope-mem0 console script is not installed"
    listed = subprocess.run(
        [script, "list", "--folder", folder, "--user", "carol", "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert [m["id"] for m in json.loads(listed.stdout)] == [memory_id]

    missing = subprocess.run(
        [script, "list", "--folder", folder, "--user", "dave"],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert missing.returncode == 1
    assert "no memories for user 'dave'" in missing.stderr


@pytest.fixture
def data_dir(_data_dir: Path) -> Path:
    return _data_dir


def _history_rows(folder: Path, memory_id: str) -> int:
    with sqlite3.connect(folder / "history.db") as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM history WHERE memory_id = ?", (memory_id,)
        ).fetchone()
    return int(count)


def _messages_mentioning(folder: Path, text: str) -> int:
    with sqlite3.connect(folder / "history.db") as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM messages WHERE content LIKE ?", (f"%{text}%",)
        ).fetchone()
    return int(count)
