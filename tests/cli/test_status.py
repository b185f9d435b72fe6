"""``status`` and ``retry-failed``: configuration, reachability, lock, vectors, outbox."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentscope_mem0 import Outbox
from agentscope_mem0.cli import cli
from agentscope_mem0.cli._lock import lock_file, lock_holder
from command_line import add_raw, run, run_json

HOLDER = """
import sys
from agentscope_mem0.local import embedded_store_config
from agentscope_mem0.testing import HashEmbedding
embedded_store_config(dims=HashEmbedding().dimensions, folder=sys.argv[1])
print("ready", flush=True)
sys.stdin.read()
"""


def _status(*args: str) -> tuple[int, dict]:
    result = run("status", "--json", *args)
    return result.exit_code, json.loads(result.stdout)


def test_status_of_a_fresh_folder(tmp_path: Path) -> None:
    folder = tmp_path / "fresh"
    folder.mkdir()
    code, report = _status("--folder", str(folder))
    assert code == 0
    assert report["ok"] is True
    assert report["settings"]["backend"] == "embedded"
    assert report["settings"]["folder"] == str(folder)
    assert report["sources"]["folder"] == "--folder"
    assert report["sources"]["embedding_model"] == "$AGENTSCOPE_MEM0_EMBEDDER"
    assert report["backend"]["reachable"] is True
    assert report["backend"]["locked"] is False
    assert report["backend"]["memories"] == 0
    assert report["vectors"] == {
        "store": None,
        "embedder": 256,
        "match": None,
        "embedder_name": "hash-embedding",
    }
    assert report["telemetry"]["enabled"] is False
    assert report["outbox"]["exists"] is False
    assert list(folder.iterdir()) == []  # looking does not create anything

    text = run("status", "--folder", str(folder))
    assert text.exit_code == 0
    for expected in ("Configuration", "Backend", "folder lock: free", "Telemetry: off", "outbox"):
        assert expected in text.stdout


def test_status_counts_memories_and_checks_vector_sizes(data_dir: Path) -> None:
    add_raw("alice", "one")
    add_raw("bob", "two")
    code, report = _status()
    assert code == 0
    assert report["backend"]["memories"] == 2
    assert report["vectors"]["store"] == 256
    assert report["vectors"]["match"] is True

    other = CliRunner(env={"AGENTSCOPE_MEM0_EMBEDDER": "hash:64"})
    mismatch = other.invoke(cli, ["status"], catch_exceptions=False)
    assert mismatch.exit_code == 2
    assert "MISMATCH" in mismatch.stdout
    refused = other.invoke(cli, ["list", "--user", "alice"], catch_exceptions=False)
    assert refused.exit_code == 2
    assert "64-dimensional" in refused.stderr


@pytest.fixture
def data_dir(_data_dir: Path) -> Path:
    return _data_dir


@pytest.fixture
def held_folder(data_dir: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the data folder's store."""
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(data_dir)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        yield child
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(timeout=60)


def test_a_locked_folder_is_reported_with_its_holder(
    held_folder: subprocess.Popen[str], data_dir: Path
) -> None:
    code, report = _status()
    assert code == 3
    assert report["ok"] is False
    assert report["backend"]["locked"] is True
    assert report["backend"]["lock_holder"]["pid"] == held_folder.pid
    assert "embedded_store_config" in report["backend"]["lock_holder"]["command"]

    text = run("status")
    assert text.exit_code == 3
    assert f"LOCKED by pid {held_folder.pid}" in text.stdout

    for args in (("list", "--user", "alice"), ("add", "--user", "alice", "--raw", "x")):
        result = run(*args)
        assert result.exit_code == 3, args
        assert f"is in use by pid {held_folder.pid}" in result.stderr
        assert "--folder" in result.stderr and "--config" in result.stderr
        assert "folder=" not in result.stderr and "mem0_config" not in result.stderr


def test_lock_holder_reads_the_kernel_lock_table(tmp_path: Path) -> None:
    lock = lock_file(tmp_path)
    lock.parent.mkdir(parents=True)
    lock.write_text("tmp lock file")
    stat = lock.stat()
    device = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}"
    table = tmp_path / "locks"
    table.write_text(
        f"1: POSIX  ADVISORY  WRITE 11 00:01:{stat.st_ino + 1} 0 EOF\n"
        f"2: FLOCK  ADVISORY  WRITE {os.getpid()} {device}:{stat.st_ino} 0 EOF\n"
        f"2: -> FLOCK  ADVISORY  WRITE 99 {device}:{stat.st_ino} 0 EOF\n"
    )
    holder = lock_holder(tmp_path, locks_table=table)
    assert holder is not None
    assert holder.pid == os.getpid()
    assert holder.is_self
    assert "python" in holder.command or "pytest" in holder.command
    table.write_text("")
    assert lock_holder(tmp_path, locks_table=table) is None


def _failed_write(folder: Path, user: str, text: str, *, agent: str | None = None) -> None:
    outbox = Outbox.in_folder(folder)
    try:
        row = outbox.insert(
            key=os.urandom(8).hex(),
            user_id=user,
            agent_id=agent,
            messages=[{"role": "user", "content": text}, {"role": "assistant", "content": "ok"}],
            owner="test:1:x",
            lease=30.0,
        )
        outbox.fail([row], "PermanentBackendError: mem0 add failed: bad request")
    finally:
        outbox.close()


def test_status_shows_failed_writes_and_retry_failed_requeues_them(data_dir: Path) -> None:
    _failed_write(data_dir, "alice", "I live in Paris.")
    _failed_write(data_dir, "bob", "I like tea.", agent="bot")
    code, report = _status()
    assert code == 0
    outbox = report["outbox"]
    assert (outbox["pending"], outbox["failed"]) == (0, 2)
    assert {(w["user_id"], w["agent_id"]) for w in outbox["failed_writes"]} == {
        ("alice", None),
        ("bob", "bot"),
    }
    assert "bad request" in outbox["failed_writes"][0]["error"]
    text = run("status").stdout
    assert "retry-failed" in text and "bob/bot" in text

    assert run_json("retry-failed", "--user", "bob") == {"requeued": 1, "sent": False}
    _, report = _status()
    assert (report["outbox"]["pending"], report["outbox"]["failed"]) == (1, 1)
    # Requeued rows are free for any writer to claim at once.
    reopened = Outbox.in_folder(data_dir)
    try:
        claimed = reopened.claim_orphans(owner="other:2:y", lease=30.0)
    finally:
        reopened.close()
    assert [r.user_id for r in claimed] == ["bob"]

    again = run("retry-failed")
    assert again.exit_code == 0
    assert "Requeued 1 failed writes" in again.stdout


def test_retry_failed_send_stores_them_now(data_dir: Path) -> None:
    _failed_write(data_dir, "alice", "I live in Paris.")
    result = run("retry-failed", "--send", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["requeued"] == 1
    assert report["stored"] == 1
    assert report["outbox"] == {"pending": 0, "failed": 0}
    assert "offline rule-based extractor" in result.stderr
    assert [m["text"] for m in run_json("list", "--user", "alice")] == ["User lives in Paris."]


def test_retry_failed_with_nothing_to_do(tmp_path: Path) -> None:
    result = run("retry-failed", "--folder", str(tmp_path / "none"))
    assert result.exit_code == 0
    assert "No failed writes" in result.stdout


async def test_status_shows_the_model_tokens_spent_per_write(data_dir: Path) -> None:
    from agentscope_mem0 import Mem0Middleware
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
    from fakes import one_session

    mw = Mem0Middleware.local(
        user_id="alice",
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(),
        folder=data_dir,
        mode="static_control",
        parameters=Mem0Middleware.Parameters(extraction="compact"),
    )
    async with mw:
        await one_session(mw, "I live in Hangzhou.")
        assert await mw.flush(timeout=30)  # stored before the change is judged against it
        await one_session(mw, "I moved to Beijing.")
        assert await mw.flush(timeout=30)
        spent = mw.stats()
    assert spent["tokens_writes"] == 2 and spent["model_calls_judge"] >= 2
    code, report = _status()
    assert code == 0
    tokens = report["tokens"]
    for key in ("tokens_in_per_write", "tokens_in_judge", "model_calls_extraction"):
        assert tokens[key] == spent[key], key
    assert tokens["kept_in"] == str(data_dir / "usage.sqlite3")
    text = run("status").stdout
    assert f"({data_dir / 'usage.sqlite3'})" in text  # where they are kept
    per_write = f"{spent['tokens_in_per_write']:,.0f}"
    assert re.search(rf"per write:\s+{per_write} in / \d+ out  \(2 writes\)", text), text
    assert re.search(r"time judgement:\s+[\d,]+ in / [\d,]+ out  \(\d+ calls\)", text), text
    # The scripted model reports no usage: the figures are estimates, and say so.
    assert re.search(rf"estimated:\s+{spent['tokens_estimated_calls']} calls", text), text
