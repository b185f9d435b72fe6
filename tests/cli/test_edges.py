"""The command's edges an operator meets first: a closed pipe, a mistyped
folder, a malformed id, nothing to migrate, the names in its JSON, and errors
worded in the command's flags rather than the library's keywords."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from command_line import CLI_ENV, add_raw, run, run_json

READERS = (
    ("list", "--user", "alice"),
    ("search", "--user", "alice", "tea"),
    ("export", "--user", "alice"),
    ("history", "3f2b8c1e-5d4a-4c2b-9e1f-0a1b2c3d4e5f"),
    ("status",),
    ("working", "--user", "alice"),
    ("ui", "--port", "0"),
    ("forget", "--user", "alice", "--all", "--yes"),
)


@pytest.mark.parametrize("args", READERS, ids=[a[0] for a in READERS])
def test_a_reading_command_refuses_a_folder_that_does_not_exist(
    args: tuple[str, ...], tmp_path: Path
) -> None:
    typo = tmp_path / "dta"
    result = run(*args, "--folder", str(typo))
    assert result.exit_code == 2, result.output
    assert f"the data folder (--folder) {typo} does not exist" in result.stderr
    assert not typo.exists()  # nothing was created there


def test_the_default_folder_missing_is_named_as_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AGENTSCOPE_MEM0_DIR")
    monkeypatch.setenv("HOME", str(tmp_path))
    result = run("list", "--user", "alice")
    assert result.exit_code == 2
    assert f"the default data folder {tmp_path / '.agentscope-mem0'} does not exist" in (
        result.stderr
    )


def test_a_writing_command_creates_the_folder(tmp_path: Path) -> None:
    folder = tmp_path / "new"
    add_raw("alice", "likes tea", "--folder", str(folder))
    assert [m["text"] for m in run_json("list", "--user", "alice", "--folder", str(folder))] == [
        "likes tea"
    ]


def test_a_malformed_memory_id_is_refused_before_any_store_is_opened(tmp_path: Path) -> None:
    # The id is checked when the command line is parsed: the (missing) folder
    # is never looked at, and no store is opened.
    for command in ("history", "forget"):
        result = run(command, "not-a-uuid", "--folder", str(tmp_path / "nope"))
        assert result.exit_code == 2, command
        assert "'not-a-uuid' is not a memory id" in result.stderr
        assert "does not exist" not in result.stderr


def test_migrate_with_nothing_to_do_says_so_and_exits_0(tmp_path: Path) -> None:
    folder = tmp_path / "fresh"
    add_raw("alice", "likes tea", "--folder", str(folder))
    result = run("migrate", "--folder", str(folder))
    assert result.exit_code == 0, result.output
    assert "nothing to migrate" in result.stderr and "no qdrant/ folder" in result.stderr
    report = run_json("migrate", "--folder", str(folder))
    assert report["migrated"] == {} and "no release-0.1 store" in report["nothing_to_do"]


def test_one_name_for_a_memory_text_in_every_json(tmp_path: Path) -> None:
    added = run_json("add", "--user", "alice", "--raw", "likes tea")
    assert [(m["text"], m["event"]) for m in added["stored"]] == [("likes tea", "ADD")]
    assert "memory" not in added["stored"][0]
    assert run_json("list", "--user", "alice")[0]["text"] == "likes tea"
    assert run_json("search", "--user", "alice", "tea")[0]["text"] == "likes tea"
    exported = run("export", "--user", "alice")
    assert json.loads(exported.stdout)["text"] == "likes tea"


def test_import_also_takes_mems0_own_name_for_the_text(tmp_path: Path) -> None:
    source = tmp_path / "mem0.jsonl"
    source.write_text(
        json.dumps({"memory": "likes green tea", "user_id": "kim"}) + "\n", encoding="utf-8"
    )
    assert run("import", str(source)).exit_code == 0
    assert [m["text"] for m in run_json("list", "--user", "kim")] == ["likes green tea"]
    both = tmp_path / "both.jsonl"
    both.write_text(
        json.dumps({"memory": "a", "text": "b", "user_id": "kim"}) + "\n", encoding="utf-8"
    )
    refused = run("import", str(both))
    assert refused.exit_code == 2 and "'text' and 'memory' differ" in refused.stderr


def test_a_store_of_another_vector_size_is_explained_in_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_raw("alice", "likes tea")
    monkeypatch.setenv("AGENTSCOPE_MEM0_EMBEDDER", "hash:64")
    result = run("list", "--user", "alice")
    assert result.exit_code == 2, result.output
    assert "64-dimensional" in result.stderr
    assert "--folder" in result.stderr and "$AGENTSCOPE_MEM0_EMBEDDER" in result.stderr
    assert "folder=" not in result.stderr


def _cli_env() -> dict[str, str]:
    env = {**os.environ, **{k: v for k, v in CLI_ENV.items() if v}}
    for name in ("DASHSCOPE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(name, None)
    return env


def test_a_reader_that_closes_the_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    """``status | head -3``: the reader is gone before the command writes; exit 0, no error."""
    folder = tmp_path / "piped"
    add_raw("alice", "likes tea", "--folder", str(folder))
    add_raw("alice", "likes jazz", "--folder", str(folder))
    commands = [
        ("status",),
        ("list", "--user", "alice"),
        ("export", "--user", "alice"),
    ]
    # One at a time: the embedded store is one process's at a time.
    for args in commands:
        child = subprocess.Popen(
            [sys.executable, "-m", "agentscope_mem0.cli", *args, "--folder", str(folder)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=_cli_env(),
        )
        assert child.stdout is not None
        child.stdout.close()  # like `head` after its lines: nobody reads any more
        _, stderr = child.communicate(timeout=300)
        assert child.returncode == 0, (args, stderr.decode())
        assert b"Broken pipe" not in stderr and b"Error" not in stderr, args
