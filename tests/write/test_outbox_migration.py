"""An outbox written by release 0.2, opened by this release: the said time becomes a column.

``data/outbox-0.2.sqlite3`` was written by release 0.2's own code (commit
30d9697) with ``data/make_outbox_0_2.py``: with that commit checked out in a
worktree, ``PYTHONPATH=<worktree>/src python tests/write/data/make_outbox_0_2.py``.
The script queues seven writes through 0.2's ``WriteQueue`` (each message dict
stamped with its said time, as 0.2 kept it), lets the worker send some of
them to a stand-in that rejects one and never answers the others, and ends
the process with ``os._exit``; a plain read and close then folds SQLite's WAL
into the file. What it holds: alice/assistant: "I live in Hangzhou." (said
2024-01-05, sent once, unconfirmed), "I moved to Beijing last month." (said
2024-03-10 22:30 at UTC-5), "Je m'appelle Zoë, 我喜欢茶." (2024-03-11 09:00
UTC, the same UTC day), "I like green tea." (said when the script ran) and an
``add_memory`` facts row; bob (no agent): "REJECT this one." (kept as failed)
and "I play the cello." (2020-05-01 18:00, sent once, unconfirmed).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from mem0 import AsyncMemory

from agentscope_mem0 import Mem0Backend, Outbox, RetryPolicy, Scope, WriteQueue
from agentscope_mem0._text.dates import iso, parse_time
from agentscope_mem0._write.outbox import OUTBOX_FILENAME
from agentscope_mem0._write.queue import METADATA_KEY

FIXTURE = Path(__file__).with_name("data") / "outbox-0.2.sqlite3"
ALICE, BOB = Scope("alice", "assistant"), Scope("bob")


def _raw(path: Path) -> list[dict[str, Any]]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(row) for row in conn.execute("SELECT * FROM writes ORDER BY id")]
    finally:
        conn.close()


def _copy(tmp_path: Path) -> Path:
    folder = tmp_path / "outbox"
    folder.mkdir()
    shutil.copyfile(FIXTURE, folder / OUTBOX_FILENAME)
    return folder


def test_every_row_keeps_its_data_and_its_said_time_becomes_the_column(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    before = _raw(folder / OUTBOX_FILENAME)
    assert len(before) == 7 and all("said_at" not in row for row in before)

    Outbox.in_folder(folder).close()

    path = folder / OUTBOX_FILENAME
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone() == (3,)
    conn.close()
    after = _raw(path)
    assert [row["id"] for row in after] == [row["id"] for row in before]
    for old, new in zip(before, after, strict=True):
        messages = json.loads(old["messages"])
        stamps = {m.pop("said_at") for m in messages}
        assert len(stamps) == 1  # 0.2 stamped every message of a write alike
        assert json.loads(new["messages"]) == messages  # the stamps are gone, nothing else
        assert new["said_at"] == iso(parse_time(stamps.pop()))  # type: ignore[arg-type]
        assert {k: v for k, v in new.items() if k not in ("messages", "said_at")} == {
            k: v for k, v in old.items() if k != "messages"
        }
    said = {json.loads(row["messages"])[0]["content"]: row["said_at"] for row in after}
    assert said["I live in Hangzhou."] == "2024-01-05T10:00:00+00:00"
    assert said["I moved to Beijing last month."] == "2024-03-11T03:30:00+00:00"
    assert said["Je m'appelle Zoë, 我喜欢茶."] == "2024-03-11T09:00:00+00:00"
    assert said["REJECT this one."] == "2020-05-01T00:00:00+00:00"

    Outbox.in_folder(folder).close()  # a second open migrates nothing again
    assert _raw(path) == after


async def test_the_next_queue_stores_them_dated_when_they_were_said(
    memory: AsyncMemory, tmp_path: Path
) -> None:
    folder = _copy(tmp_path)
    stamps = {
        json.loads(row["messages"])[0]["content"]: json.loads(row["messages"])[0]["said_at"]
        for row in _raw(folder / OUTBOX_FILENAME)
    }
    queue = WriteQueue(
        Mem0Backend(memory), outbox_dir=folder, retry=RetryPolicy(initial_delay=0.01)
    )
    assert await queue.flush(30)
    assert queue.stats()["writes_replayed"] == 6 and queue.stats()["writes_stored"] == 6
    (failed,) = await queue.failed()
    assert failed.messages[0]["content"] == "REJECT this one."
    assert "rejected on purpose" in (failed.error or "")
    assert await queue.retry_failed() == 1  # mem0 takes it now (and finds no fact in it)
    assert await queue.flush(30)
    assert queue.stats()["writes_stored"] == 7 and await queue.failed() == []

    stored = {}
    for scope in (ALICE, BOB):
        raw = await memory.get_all(filters=scope.filters(), top_k=100)
        stored.update({item["memory"].split(" #")[0]: item for item in raw["results"]})
    assert set(stored) == {
        "User lives in Hangzhou.",
        "User moved to Beijing last month.",
        "Je m'appelle Zoë, 我喜欢茶.",
        "User likes green tea.",
        "User is allergic to peanuts.",
        "User play the cello.",
    }
    dated = {text: item["metadata"]["said_at"] for text, item in stored.items()}
    assert dated["User lives in Hangzhou."] == "2024-01-05T10:00:00+00:00"
    facts = stamps["User is allergic to peanuts."]
    assert dated["User is allergic to peanuts."] == iso(parse_time(facts))  # type: ignore[arg-type]
    # Said on one UTC day: one mem0 call, dated by the newer of the two.
    beijing, name = (
        stored["User moved to Beijing last month."],
        stored["Je m'appelle Zoë, 我喜欢茶."],
    )
    assert beijing["metadata"][METADATA_KEY] == name["metadata"][METADATA_KEY]
    assert dated["User moved to Beijing last month."] == "2024-03-11T09:00:00+00:00"
    assert beijing["created_at"].startswith("2024-03-11")
    assert dated["User likes green tea."] == iso(parse_time(stamps["I like green tea."]))  # type: ignore[arg-type]
    assert dated["User play the cello."] == iso(parse_time(stamps["I play the cello."]))  # type: ignore[arg-type]
    keys = Counter(item["metadata"][METADATA_KEY] for item in stored.values())
    assert sorted(keys.values()) == [1, 1, 1, 1, 2]  # only the two said together share a call
    await queue.aclose()


def test_a_damaged_0_2_outbox_is_repaired_into_the_new_schema(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    path = folder / OUTBOX_FILENAME
    expected = _raw(path)
    conn = sqlite3.connect(path)
    (page,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'writes_by_batch'")
    (size,) = conn.execute("PRAGMA page_size").fetchone()
    conn.close()
    with path.open("r+b") as f:  # an index page of garbage: the rows themselves are intact
        f.seek((page[0] - 1) * size)
        f.write(b"\xa5" * size)

    box = Outbox.in_folder(folder)
    assert box.recovered_at_open == 7
    box.close()
    repaired = _raw(path)
    assert [row["key"] for row in repaired] == [row["key"] for row in expected]
    said = {json.loads(row["messages"])[0]["content"]: row["said_at"] for row in repaired}
    assert said["I moved to Beijing last month."] == "2024-03-11T03:30:00+00:00"
    assert all("said_at" not in m for row in repaired for m in json.loads(row["messages"]))
