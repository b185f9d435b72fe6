"""The README's complete example runs as written, offline, and remembers.

The code block under "Your first agent with memory" is extracted from
README.md and run in a fresh interpreter on a temporary data folder, with no
model keys set: the scripted chat model stands in for the LLM, the memory
side (mem0, the embedded store, the offline embedder) is real.
"""

from __future__ import annotations

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


def _run(code: str, folder: Path) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DASHSCOPE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"}
    }
    env["AGENTSCOPE_MEM0_DIR"] = str(folder)
    script = folder.parent / "first_agent.py"
    script.write_text(code, encoding="utf-8")
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env
    )


def test_the_readme_example_runs_and_session_two_remembers(tmp_path: Path) -> None:
    code = readme_example()
    assert "asyncio.run(" in code and "await mw.flush()" in code
    done = _run(code, tmp_path / "data")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "I live in Hangzhou. -> Noted.",
        "Where do I live? -> You live in Hangzhou.",
    ]
    assert (tmp_path / "data").is_dir()  # it used the folder it was given


def test_without_the_flush_session_two_does_not_know(tmp_path: Path) -> None:
    """The control: the flush the README asks for is what makes session 2 remember."""
    code = readme_example().replace("await mw.flush()", "pass")
    done = _run(code, tmp_path / "data")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "Where do I live? -> I don't know where you live."
