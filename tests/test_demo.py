"""The two-session demo, offline, on the real embedded default."""

from __future__ import annotations

import asyncio
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentscope_mem0.cli import cli
from agentscope_mem0.demo import DEMO_USER, run_demo

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("mode", ["static_control", "agent_control", "both"])
async def test_session_two_uses_what_session_one_was_told(mode: str, tmp_path: Path) -> None:
    out = io.StringIO()
    _, second = await run_demo(mode, folder=tmp_path / "demo", out=out)  # type: ignore[arg-type]
    transcript = out.getvalue()
    assert "offline scripted model" in transcript
    assert 'plt.style.use("dark_background")' in second
    assert "matplotlib" in second and "Hangzhou" in second
    assert "session 2 used dark mode and matplotlib" in transcript
    assert transcript.count("[assistant]") == 2
    if mode == "agent_control":
        assert "[tool call (agent)] add_memory" in transcript
        assert "[tool call (agent)] search_memory" in transcript
        assert "[mem0 → context (static)]" not in transcript
        assert "[context → mem0 (static)]" not in transcript
    else:
        assert "[mem0 → context (static)]" in transcript
        assert "[context → mem0 (static)] User lives in Hangzhou." in transcript
    if mode == "static_control":
        assert "(add_memory)" not in transcript
    else:
        # What the tool stored is labelled as the agent's, not as a static write.
        assert "[agent → mem0 (add_memory)] The user lives in Hangzhou." in transcript
        assert "[context → mem0 (static)] The user lives in Hangzhou." not in transcript


def test_default_is_both_for_alice_and_the_cli_finds_it(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    out = io.StringIO()
    asyncio.run(run_demo(folder=folder, out=out))
    transcript = out.getvalue()
    assert DEMO_USER == "alice"
    assert "mode: both" in transcript
    assert f"memories of user 'alice' are stored in {folder}" in transcript
    assert f"agentscope-mem0 list --user alice --folder {folder}" in transcript
    listed = CliRunner().invoke(
        cli, ["list", "--user", "alice", "--folder", str(folder)], catch_exceptions=False
    )
    assert listed.exit_code == 0, listed.output
    assert "Hangzhou" in listed.stdout


def test_demo_script_help_and_bad_mode() -> None:
    script = str(ROOT / "demos" / "oss_demo.py")
    shown = subprocess.run(
        [sys.executable, script, "--help"], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    assert "static_control,agent_control,both" in shown.stdout and "--folder" in shown.stdout
    bad = subprocess.run(
        [sys.executable, script, "nonsense"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "AGENTSCOPE_MEM0_DIR": "/nonexistent/never-written"},
    )
    assert bad.returncode == 2
    assert "invalid choice: 'nonsense'" in bad.stderr


async def test_demo_starts_from_a_clean_store(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    await run_demo("static_control", folder=folder, out=io.StringIO())
    out = io.StringIO()
    await run_demo("static_control", folder=folder, out=out)
    # the second run's first session has no memory note: its store was cleared
    session_one = out.getvalue().split("=== session 2")[0]
    assert "[mem0 → context (static)]" not in session_one
