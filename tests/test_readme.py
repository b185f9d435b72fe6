"""The README's complete example needs the flush it asks for.

``tests/test_docs.py`` runs the example as written (it is marked runnable)
and checks it prints what the README shows. Here the control: the code block
under "Your first agent with memory", run in a fresh interpreter without its
``await mw.flush()``, does not remember.
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


def test_without_the_flush_session_two_does_not_know(tmp_path: Path) -> None:
    """The control: the flush the README asks for is what makes session 2 remember."""
    code = readme_example().replace("await mw.flush()", "pass")
    done = _run(code, tmp_path / "data")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "Where do I live? -> I don't know where you live."
