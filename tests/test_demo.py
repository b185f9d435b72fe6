"""The two-session demo, offline, on the real embedded default."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from agentscope_mem0.demo import run_demo


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
    else:
        assert "[mem0 → context (static)]" in transcript
        assert "[context → mem0 (static)] User lives in Hangzhou." in transcript


async def test_demo_starts_from_a_clean_store(tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    await run_demo("static_control", folder=folder, out=io.StringIO())
    out = io.StringIO()
    await run_demo("static_control", folder=folder, out=out)
    # the second run's first session has no memory note: its store was cleared
    session_one = out.getvalue().split("=== session 2")[0]
    assert "[mem0 → context (static)]" not in session_one
