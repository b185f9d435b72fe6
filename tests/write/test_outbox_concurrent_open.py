"""Two processes open the same outbox at once: the schema is built once, and a
row one commits while the other opens is not taken for a lost one.

Each opener connects, then migrates. A second opener that read the schema's
version before the first finished migrating would apply the same step again
("duplicate column name"), which is what four workers starting together on one
data folder met. The test holds the first opener inside a migration step until
the second has asked for the write lock, so the second has connected and read
what it reads before the first commits.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import pytest

from agentscope_mem0 import Outbox
from agentscope_mem0._sqlite.salvage import HighWater
from agentscope_mem0._write import outbox as outbox_module


def test_the_second_opener_finds_the_schema_the_first_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "outbox.sqlite3"
    inside = threading.Event()  # the first opener is in its last step, holding the lock
    asked = threading.Event()  # the second opener has asked for the write lock
    applied: list[str] = []

    def add_column(conn: sqlite3.Connection) -> None:
        applied.append(threading.current_thread().name)
        inside.set()
        assert asked.wait(10), "the second opener never asked for the write lock"
        conn.execute("ALTER TABLE writes ADD COLUMN kind TEXT")

    migrations = ("CREATE TABLE writes (id INTEGER PRIMARY KEY AUTOINCREMENT)", add_column)
    connect = sqlite3.connect

    def traced(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = connect(*args, **kwargs)

        def seen(statement: str) -> None:
            if inside.is_set() and statement.startswith("BEGIN IMMEDIATE"):
                asked.set()

        conn.set_trace_callback(seen)
        return conn

    monkeypatch.setattr(sqlite3, "connect", traced)
    monkeypatch.setattr(outbox_module, "MIGRATIONS", migrations)
    first: list[Outbox] = []
    failed: list[BaseException] = []

    def open_first() -> None:
        try:
            first.append(Outbox(path))
        except BaseException as exc:
            failed.append(exc)

    opener = threading.Thread(target=open_first)
    opener.start()
    assert inside.wait(10)
    second = Outbox(path)
    opener.join(10)
    assert not failed and first
    try:
        assert len(applied) == 1  # the column was added by one opener only
        conn = connect(path)
        assert conn.execute("PRAGMA user_version").fetchone() == (2,)
        assert [c[1] for c in conn.execute("PRAGMA table_info(writes)")] == ["id", "kind"]
        conn.close()
    finally:
        first[0].close()
        second.close()


def test_a_file_newer_than_this_code_is_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "outbox.sqlite3"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE writes (id INTEGER PRIMARY KEY AUTOINCREMENT, later TEXT)")
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    conn.close()

    only_the_first = ("CREATE TABLE writes (id INTEGER PRIMARY KEY AUTOINCREMENT)",)
    monkeypatch.setattr(outbox_module, "MIGRATIONS", only_the_first)
    Outbox(path).close()

    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (5,)
    assert [c[1] for c in conn.execute("PRAGMA table_info(writes)")] == ["id", "later"]
    conn.close()


def test_a_commit_made_while_another_process_opens_is_not_taken_for_lost_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer commits, then raises the high-water mark beside the file. An
    opener that read the last row id before such a commit and the mark after
    it must not report the new row as lost with a deleted WAL."""
    writer = Outbox.in_folder(tmp_path)

    def record(key: str) -> int:
        said = [{"role": "user", "content": "I like tea."}]
        return writer.insert(
            key=key, user_id="u", agent_id=None, messages=said, owner="o", lease=30.0
        )

    for i in range(3):
        record(f"k{i}")
    read = HighWater.read
    raced: list[int] = []

    def read_after_a_commit(self: HighWater) -> int:
        if not raced:  # the first read of the opener: the writer commits now
            raced.append(record("late"))
        return read(self)

    monkeypatch.setattr(HighWater, "read", read_after_a_commit)
    opener = Outbox.in_folder(tmp_path)
    try:
        assert raced == [4]
        assert opener.lost_at_open == 0
        assert opener.counts() == {"pending": 4, "failed": 0}
    finally:
        opener.close()
        writer.close()
