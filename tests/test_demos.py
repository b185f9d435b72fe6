"""The real-model examples in demos/: without a key or base URL they say so
and exit 0; the two sessions they share run offline with stand-in models."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

DEMOS = Path(__file__).resolve().parents[1] / "demos"
KEYS = ("DASHSCOPE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL")


@pytest.mark.parametrize(
    ("script", "needs"),
    [
        ("dashscope_example.py", "DASHSCOPE_API_KEY"),
        ("openai_compatible_example.py", "OPENAI_BASE_URL"),
    ],
)
def test_examples_skip_cleanly_without_a_key(script: str, needs: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    done = subprocess.run(
        [sys.executable, str(DEMOS / script), "--folder", str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("skipped: ") and needs in done.stdout
    assert done.stderr == ""
    assert not (tmp_path / "data").exists()  # nothing written when skipped


def _answer(messages: list, tools: object) -> str:
    context = " ".join(str(m.content) for m in messages)
    if "Where do I live" not in context:
        return "Noted."
    return "Hangzhou; bullet points." if "Hangzhou" in context else "I don't know."


def test_the_shared_two_sessions_remember(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(DEMOS))
    from _sessions import two_sessions

    first, second = asyncio.run(
        two_sessions(ScriptedChatModel(_answer), HashEmbedding(), folder=tmp_path / "data")
    )
    assert first == "Noted."
    assert second == "Hangzhou; bullet points."
