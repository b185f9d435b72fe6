"""enable_wal: first opens of one SQLite file at once all get WAL, none 'database is locked'."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from agentscope_mem0._sqlite.wal import enable_wal


def test_concurrent_first_opens_all_switch_to_wal(tmp_path: Path) -> None:
    # A plain PRAGMA journal_mode=WAL failed here in about 1 of 10 such rounds.
    errors: list[BaseException] = []
    modes: list[str] = []
    for round_ in range(60):
        path = tmp_path / f"db{round_}.sqlite3"
        barrier = threading.Barrier(8)

        def open_and_write(file: Path = path, start: threading.Barrier = barrier) -> None:
            try:
                start.wait()
                conn = sqlite3.connect(file, timeout=30, isolation_level=None)
                try:
                    modes.append(enable_wal(conn, 30))
                    conn.execute("CREATE TABLE IF NOT EXISTS t (a)")
                    conn.execute("INSERT INTO t VALUES (1)")
                finally:
                    conn.close()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=open_and_write) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors, errors[:3]
    assert modes == ["wal"] * 480


def test_a_file_that_stays_locked_still_fails(tmp_path: Path) -> None:
    path = tmp_path / "held.sqlite3"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (a)")
    holder.execute("BEGIN EXCLUSIVE")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        try:
            enable_wal(other, 0.2)
        except sqlite3.OperationalError as exc:
            assert "locked" in str(exc)
        else:
            raise AssertionError("enable_wal succeeded on a file another connection holds")
    finally:
        other.close()
        holder.execute("ROLLBACK")
        holder.close()
