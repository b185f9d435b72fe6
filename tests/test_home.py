"""The test suite never writes into the real home folder, and mem0's
telemetry stays off whatever was imported first.

A slice of the suite that imports mem0 first (the fixtures do), builds real
memories, drives the command and mem0's hosted client, runs in a child
pytest whose ``HOME`` is an empty folder and which inherits none of the
suite's folder variables; the folder must still be empty afterwards.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SLICE = (
    "tests/test_package.py",
    "tests/test_hosted.py",
    "tests/cli/test_commands.py::test_history_shows_mem0_changes",
    "tests/cli/test_hosted.py",
)


def test_a_slice_of_the_suite_leaves_an_empty_home_empty(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"MEM0_DIR", "AGENTSCOPE_MEM0_DIR", "AGENTSCOPE_MEM0_CONFIG"}
        and not k.startswith("XDG_")
    }
    env["HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SLICE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "passed" in done.stdout
    written = sorted(str(p.relative_to(home)) for p in home.rglob("*"))
    assert written == [], written
    # mem0's telemetry never tried to send: no upload errors in the output.
    assert "posthog" not in (done.stdout + done.stderr).lower()
