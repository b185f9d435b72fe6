"""The README's complete example needs the flush it asks for, and works after
the demo, in the order the README gives them.

``tests/test_docs.py`` runs the example as written (it is marked runnable)
and checks it prints what the README shows. Here the control: the code block
under "Your first agent with memory", run in a fresh interpreter without its
``await mw.flush()``, does not remember; and the example run right after the
README's first command (the demo, which makes "lives in Hangzhou" superseded
in the same data folder) still tells where the user lives.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SECTION = "## Your first agent with memory"


def readme_example() -> str:
    """The first ``python`` block after the section heading."""
    text = README.read_text(encoding="utf-8")
    assert SECTION in text
    after = text.split(SECTION, 1)[1]
    match = re.search(r"```python\n(.*?)```", after, re.S)
    assert match, "no python block in the section"
    return match.group(1)


def _env(folder: Path) -> dict[str, str]:
    """This environment without a real model's keys, on the data folder ``folder``."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DASHSCOPE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"}
    }
    env["AGENTSCOPE_MEM0_DIR"] = str(folder)
    return env


def _run(code: str, folder: Path) -> subprocess.CompletedProcess[str]:
    script = folder.parent / "first_agent.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(folder),
        stdin=subprocess.DEVNULL,
    )


def test_without_the_flush_session_two_does_not_know(tmp_path: Path) -> None:
    """The control: the flush the README asks for is what makes session 2 remember."""
    code = readme_example().replace("await mw.flush()", "pass")
    done = _run(code, tmp_path / "data")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "Where do I live? -> I don't know where you live."


def test_after_the_demo_the_first_agent_knows_where_the_user_lives(tmp_path: Path) -> None:
    """The README's order: its first command runs the demo, whose session 3 makes
    "lives in Hangzhou" superseded by Beijing; the first-agent script then tells
    Hangzhou again on the same data folder and must be answered from its note."""
    folder = tmp_path / "data"
    demo = subprocess.run(
        [sys.executable, str(ROOT / "demos" / "oss_demo.py")],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(folder),
        stdin=subprocess.DEVNULL,
    )
    assert demo.returncode == 0, demo.stderr
    assert "session 4 used Beijing, not Hangzhou" in demo.stdout
    done = _run(readme_example(), folder)
    assert done.returncode == 0, done.stderr
    # The scripted model answers "You live in Hangzhou." only when its context,
    # which is the question and the memory note, names Hangzhou.
    assert done.stdout.splitlines()[-1] == "Where do I live? -> You live in Hangzhou."
    listed = subprocess.run(
        [sys.executable, "-m", "agentscope_mem0.cli", "list", "--user", "alice", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=_env(folder),
        stdin=subprocess.DEVNULL,
    )
    assert listed.returncode == 0, listed.stderr
    current = [str(m["text"]) for m in json.loads(listed.stdout)]
    assert any("Hangzhou" in text for text in current), current
