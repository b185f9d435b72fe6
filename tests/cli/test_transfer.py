"""``export`` and ``import``: exact round trip, idempotence and resumption.

The source store is filled by mem0 itself (``add(infer=False)`` in batches,
plus updates), so the rows exported are the rows mem0 writes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agentscope_mem0 import TransientBackendError
from agentscope_mem0.cli._mem0_store import MemoryStore
from agentscope_mem0.cli._records import MemoryRecord, parse_line
from command_line import run, run_json, seed


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return seed(tmp_path_factory.mktemp("source") / "data")


def _export(folder: Path, target: Path, *extra: str) -> list[str]:
    result = run("export", "--folder", str(folder), "-o", str(target), *extra)
    assert result.exit_code == 0, result.output
    return target.read_text(encoding="utf-8").splitlines()


def _history(folder: Path, memory_id: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(folder / "history.db") as conn:
        return conn.execute(
            "SELECT event, new_memory, created_at FROM history WHERE memory_id = ?",
            (memory_id,),
        ).fetchall()


def test_round_trip_of_1000_memories_is_exact_resumable_and_idempotent(
    seeded: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source_file = tmp_path / "source.jsonl"
    lines = _export(seeded, source_file, "--all-users")
    assert len(lines) == 1000
    records = [json.loads(line) for line in lines]
    # The export carries every kind of field mem0 stores.
    assert Counter(r["user_id"] for r in records) == {f"user{i}": 200 for i in range(5)}
    assert sum("agent_id" in r for r in records) == 500
    assert sum(r.get("run_id") == "run-7" for r in records) == 50
    assert sum(r.get("actor_id") == "narrator" for r in records) == 20 * 8
    assert sum(r.get("expiration_date") == "2999-12-31" for r in records) == 50
    assert {r["role"] for r in records} == {"user", "assistant"}
    corrected = [r for r in records if r["text"].endswith("(corrected)")]
    assert len(corrected) == 5
    assert all(r["updated_at"] != r["created_at"] for r in corrected)
    assert records[0]["metadata"] == {"batch": 0, "nested": {"a": None, "z": 1}, "tags": ["a", "ü"]}
    assert [r["created_at"] for r in records] == sorted(r["created_at"] for r in records)

    target = tmp_path / "target"
    original = MemoryStore.insert
    calls = 0

    async def fail_on_fourth_batch(self: MemoryStore, batch: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 4:
            raise TransientBackendError("mem0 insert failed") from ConnectionResetError()
        await original(self, batch)

    monkeypatch.setattr(MemoryStore, "insert", fail_on_fourth_batch)
    interrupted = run("import", str(source_file), "--folder", str(target))
    assert interrupted.exit_code == 3, interrupted.output
    assert "300 stored and 0 already present of 1000" in interrupted.stderr
    assert "run the same command again to resume" in interrupted.stderr
    monkeypatch.setattr(MemoryStore, "insert", original)

    resumed = run_json("import", str(source_file), "--folder", str(target))
    assert resumed == {"read": 1000, "stored": 700, "already_present": 300}
    again = run_json("import", str(source_file), "--folder", str(target), "--batch-size", "250")
    assert again == {"read": 1000, "stored": 0, "already_present": 1000}

    # Exact: the target exports byte for byte what the source did.
    assert _export(target, tmp_path / "target.jsonl", "--all-users") == lines
    # mem0 sees the imported memories as its own: one ADD entry each, dated.
    sample = corrected[0]
    assert _history(target, sample["id"]) == [("ADD", sample["text"], sample["created_at"])]
    hits = run_json("search", "--folder", str(target), "--user", "user1", sample["text"])
    assert hits[0]["id"] == sample["id"]
    assert hits[0]["updated_at"] == sample["updated_at"]
    listed = run_json("list", "--folder", str(target), "--user", "user3", "--limit", "1000")
    assert len(listed) == 200


def test_export_of_one_user_and_agent_to_stdout(seeded: Path, tmp_path: Path) -> None:
    result = run("export", "--folder", str(seeded), "--user", "user0", "--agent", "agent0")
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records
    assert {(r["user_id"], r["agent_id"]) for r in records} == {("user0", "agent0")}
    assert "exported" in result.stderr
    assert _export(seeded, tmp_path / "u.jsonl", "--user", "user0", "--agent", "agent0") == (
        result.stdout.splitlines()
    )
    assert [p.name for p in tmp_path.iterdir()] == ["u.jsonl"]  # no temporary left behind


def _read_fifo(fifo: Path, into: list[bytes]) -> tuple[threading.Thread, int]:
    """A thread reading ``fifo`` into ``into`` until every writer is gone, and the
    fd of a writer held open meanwhile (close it to let the thread finish: a
    FIFO never opened by the export must not leave the thread waiting)."""
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    holder = os.open(fifo, os.O_WRONLY)
    os.set_blocking(reader, True)

    def drain() -> None:
        try:
            while chunk := os.read(reader, 65536):
                into.append(chunk)
        finally:
            os.close(reader)

    thread = threading.Thread(target=drain, name="fifo-reader", daemon=True)
    thread.start()
    return thread, holder


def test_export_writes_through_a_fifo_a_symlink_and_a_device(seeded: Path, tmp_path: Path) -> None:
    """A path that is not a regular file is written through, never replaced."""
    expected = run("export", "--folder", str(seeded), "--user", "user0").stdout
    assert expected
    select = ("--folder", str(seeded), "--user", "user0", "-o")

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    chunks: list[bytes] = []
    thread, holder = _read_fifo(fifo, chunks)
    try:
        result = run("export", *select, str(fifo))
    finally:
        os.close(holder)
        thread.join(30)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still a FIFO
    assert b"".join(chunks).decode() == expected

    target = tmp_path / "real.jsonl"
    target.write_text("old\n")
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    assert run("export", *select, str(link)).exit_code == 0
    assert link.is_symlink() and link.resolve() == target  # the link stays a link
    assert target.read_text() == expected  # and its target gets the data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.jsonl", "pipe", "real.jsonl"]

    # A character device: safe to try only now that a FIFO was written through
    # (the code before replaced the path, which would have replaced /dev/null).
    assert run("export", *select, os.devnull).exit_code == 0
    assert stat.S_ISCHR(os.lstat(os.devnull).st_mode)


def test_export_needs_one_selection() -> None:
    assert run("export").exit_code == 2
    assert run("export", "--user", "a", "--all-users").exit_code == 2
    assert run("export", "--agent", "a", "--all-users").exit_code == 2


def test_export_of_an_empty_store_writes_nothing(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = run("export", "--all-users", "--folder", str(tmp_path / "empty"))
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "exported 0 memories" in result.stderr


def test_import_from_stdin_and_interrupt_with_ctrl_c(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lines = "\n".join(
        json.dumps(
            {"text": f"fact {i}", "user_id": "erin", "created_at": f"2024-01-0{i + 1}T09:00"}
        )
        for i in range(5)
    )
    original = MemoryStore.insert

    async def ctrl_c(self: MemoryStore, batch: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(MemoryStore, "insert", ctrl_c)
    stopped = run("import", "-", "--batch-size", "2", input=lines)
    assert stopped.exit_code == 130
    assert "interrupted" in stopped.stderr
    monkeypatch.setattr(MemoryStore, "insert", original)

    assert run_json("import", "-", "--batch-size", "2", input=lines) == {
        "read": 5,
        "stored": 5,
        "already_present": 0,
    }
    listed = run_json("list", "--user", "erin")
    assert sorted(m["text"] for m in listed) == [f"fact {i}" for i in range(5)]
    # Without an id in the file, the id comes from scope and text: re-imports match.
    assert run_json("import", "-", input=lines)["already_present"] == 5
    assert all(m["updated_at"] == m["created_at"] for m in listed)


def test_import_rejects_a_malformed_file_before_storing_anything(tmp_path: Path) -> None:
    good = {"id": str(uuid.uuid4()), "text": "ok", "user_id": "frank"}
    bad_lines = [
        json.dumps(good),
        "not json",
        json.dumps({"text": "no scope"}),
        json.dumps({"text": "x", "user_id": "frank", "id": "not-a-uuid"}),
        json.dumps({"text": "x", "user_id": "frank", "colour": "red"}),
        json.dumps({"text": "x", "user_id": "frank", "metadata": {"user_id": "eve"}}),
        json.dumps(good),
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(bad_lines) + "\n", encoding="utf-8")
    result = run("import", str(path))
    assert result.exit_code == 2
    for number in range(2, 8):
        assert f"line {number}:" in result.stderr
    assert "nothing was imported" in result.stderr
    listed = run("list", "--user", "frank")
    assert listed.exit_code == 2 and "does not exist" in listed.stderr  # not even a folder

    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    assert run("import", str(empty)).exit_code == 2
    assert run("import", str(tmp_path / "missing.jsonl")).exit_code == 2


def _nested(depth: int) -> str:
    """Metadata ``depth`` objects deep, as JSON text."""
    return '{"a": ' * depth + "1" + "}" * depth


def test_import_refuses_text_that_is_not_unicode_and_metadata_nested_too_deep(
    tmp_path: Path,
) -> None:
    """A lone surrogate (valid JSON, invalid text) and metadata nested deeper than
    a store can hold are caught with the other checks, before anything is stored."""
    good = {"text": "ok", "user_id": "frank"}
    lines = [
        json.dumps(good),
        json.dumps({"text": "bad \ud800 text", "user_id": "frank"}),  # ensure_ascii: "\ud800"
        json.dumps({"text": "x", "user_id": "frank", "metadata": {"k\udfff": 1}}),
        '{"text": "x", "user_id": "frank", "metadata": ' + _nested(5000) + "}",
        '{"text": "x", "user_id": "frank", "metadata": ' + _nested(200) + "}",
        json.dumps({**good, "text": "also ok"}),
    ]
    path = tmp_path / "bad.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    result = run("import", str(path))
    assert result.exit_code == 2, result.output
    assert "line 2: " in result.stderr and "surrogate" in result.stderr
    assert "line 3: " in result.stderr
    assert "line 4: " in result.stderr and "nested" in result.stderr
    assert "line 5: " in result.stderr
    assert "nothing was imported" in result.stderr
    listed = run("list", "--user", "frank")
    assert listed.exit_code == 2 and "does not exist" in listed.stderr  # nothing stored

    # Nesting the format allows round-trips.
    path.write_text('{"text": "x", "user_id": "frank", "metadata": ' + _nested(20) + "}\n")
    assert run("import", str(path)).exit_code == 0
    assert run("export", "--user", "frank").stdout.count('{"a": ') == 20


def test_a_memory_holding_a_1_mb_word_imports_and_is_found_by_its_other_words(
    tmp_path: Path,
) -> None:
    """The word is left out of the keyword side (tests/local/test_keyword.py
    shows the time it cost); the memory is stored whole."""
    import random
    import string

    word = "".join(random.Random(1).choices(string.ascii_lowercase, k=1_000_000))
    path = tmp_path / "word.jsonl"
    line = {"text": f"Hector keeps {word} in Valparaiso", "user_id": "hector"}
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    assert run_json("import", str(path))["stored"] == 1
    (found,) = run_json("search", "--user", "hector", "Valparaiso")
    assert found["text"] == line["text"]


def test_import_into_a_store_of_another_vector_size_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "small"
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"text": "x", "user_id": "gina"}) + "\n", encoding="utf-8")
    assert run("add", "--folder", str(folder), "--user", "gina", "--raw", "y").exit_code == 0
    result = CliRunnerWithEnv(AGENTSCOPE_MEM0_EMBEDDER="hash:64").invoke(
        "import", str(path), "--folder", str(folder)
    )
    assert result.exit_code == 2
    assert "64-dimensional" in result.stderr


class CliRunnerWithEnv:
    """Run the command with extra environment variables."""

    def __init__(self, **env: str) -> None:
        self.env = env

    def invoke(self, *args: str) -> Any:
        from click.testing import CliRunner

        from agentscope_mem0.cli import cli

        return CliRunner(env=self.env).invoke(cli, list(args), catch_exceptions=False)


def test_record_format_round_trips_a_payload() -> None:
    payload = {
        "data": "User likes tea",
        "hash": "abc",
        "user_id": "u",
        "agent_id": "a",
        "role": "user",
        "created_at": "2025-01-01T00:00:00+00:00",
        "updated_at": "2025-01-02T00:00:00+00:00",
        "text_lemmatized": "user like tea",
        "topic": {"b": 1, "a": [1, 2]},
    }
    record = MemoryRecord.from_payload("3f2b8c1e-5d4a-4c2b-9e1f-0a1b2c3d4e5f", payload)
    line = record.to_line()
    assert list(json.loads(line)) == [
        "id", "text", "user_id", "agent_id", "role", "created_at", "updated_at", "hash",
        "metadata",
    ]  # fmt: skip
    again = parse_line(line, 1)
    assert again == record
    assert again.to_payload(lemmatized="user like tea") == payload


# -- the package's own fields, namespaced in the output ------------------------------

_OWN = {
    "said_at": "2025-06-01T08:25:09+00:00",
    "valid_from": "2025-06-01T08:25:09+00:00",
    "fact_question": "Where does the user live?",
    "fact_answer": "Hangzhou",
    "agentscope_mem0_write": "w-1",
}
_LINE = {
    "id": "9379d3c9-f058-4ef2-a5a1-10168d63b4d6",
    "text": "User lives in Hangzhou.",
    "user_id": "alice",
    "created_at": "2025-06-01T08:25:09+00:00",
}


def _import(folder: Path, line: dict[str, Any], tmp_path: Path) -> Any:
    path = tmp_path / f"{folder.name}.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    return run("import", str(path), "--folder", str(folder))


def test_the_packages_fields_are_namespaced_and_both_shapes_import_alike(
    tmp_path: Path,
) -> None:
    # A line of the former shape: the package's fields mixed into the user's metadata.
    old = tmp_path / "old"
    assert _import(old, {**_LINE, "metadata": {"topic": "home", **_OWN}}, tmp_path).exit_code == 0
    (listed,) = run_json("list", "--user", "alice", "--folder", str(old))
    assert listed["metadata"] == {"topic": "home"}
    assert listed["agentscope_mem0"] == _OWN
    (exported,) = _export(old, tmp_path / "old-export.jsonl", "--user", "alice")
    line = json.loads(exported)
    assert line["metadata"] == {"topic": "home"} and line["agentscope_mem0"] == _OWN
    assert list(line)[-2:] == ["metadata", "agentscope_mem0"]

    # The new shape imports to the same stored memory: the export round-trips.
    new = tmp_path / "new"
    assert _import(new, line, tmp_path).exit_code == 0
    assert _export(new, tmp_path / "new-export.jsonl", "--user", "alice") == [exported]
    # What is stored is unchanged: one metadata object, as the middleware writes it.
    assert parse_line(exported, 1).metadata == {"topic": "home", **_OWN}


def test_an_import_line_with_a_field_given_twice_differently_is_refused(tmp_path: Path) -> None:
    twice = {**_LINE, "metadata": {"said_at": "2024-01-01"}, "agentscope_mem0": _OWN}
    result = _import(tmp_path / "a", twice, tmp_path)
    assert result.exit_code == 2 and "'said_at' differ" in result.stderr
    strange = {**_LINE, "agentscope_mem0": {"topic": "home"}}
    result = _import(tmp_path / "b", strange, tmp_path)
    assert result.exit_code == 2 and "not fields of this package" in result.stderr
