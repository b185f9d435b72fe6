"""Every Python block of the README and docs/ compiles, imports what it uses,
and the blocks marked runnable run and print what the docs show.

A block is marked runnable by an HTML comment on the line before its fence
(``<!-- runnable -->``, invisible on the rendered page); a ```console block
right after it starting with ``$ python ...`` holds the output it must print.
Other blocks are fragments: they may use the placeholders below (a model, an
embedder, a config the reader brings) and nothing else they do not define.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUNNABLE = "<!-- runnable -->"
PLACEHOLDERS = (
    "model",
    "chat_model",
    "embedding_model",
    "embedder",
    "mem0_config",
    "memory",
    "user_msg",
    "credential",
    "extraction_model",
)
"""What a fragment may use without defining it: things the reader brings."""

_BLOCK = re.compile(r"(?P<before>[^\n]*)\n```python\n(?P<code>.*?)```", re.S)
_CONSOLE = re.compile(r"\A\s*```console\n\$ python [^\n]*\n(?P<output>.*?)```", re.S)


@dataclass(frozen=True)
class Block:
    """One ```python block of a page."""

    page: Path
    line: int
    code: str
    runnable: bool
    output: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            console = _CONSOLE.match(text, match.end())
            found.append(
                Block(
                    page=page,
                    line=text[: match.start("code")].count("\n"),
                    code=match.group("code"),
                    runnable=match.group("before").strip() == RUNNABLE,
                    output=console.group("output") if console else None,
                )
            )
    return found


BLOCKS = _blocks()


@pytest.mark.parametrize("block", BLOCKS, ids=[b.name for b in BLOCKS])
def test_every_block_compiles(block: Block) -> None:
    # Fragments run inside an async function: top-level await is allowed.
    compile(block.code, block.name, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)


def test_blocks_define_or_import_every_name_but_the_placeholders(tmp_path: Path) -> None:
    for number, block in enumerate(BLOCKS):
        (tmp_path / f"block{number}.py").write_text(block.code, encoding="utf-8")
    builtins = json.dumps(list(PLACEHOLDERS))
    done = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--isolated", "--no-cache", "--select", "F821",
         "--config", f"builtins = {builtins}", "--output-format", "json", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    problems = [
        f"{BLOCKS[int(Path(p['filename']).stem[5:])].name}: {p['message']}"
        for p in json.loads(done.stdout or "[]")
    ]
    assert problems == []


def test_the_runnable_blocks_are_marked() -> None:
    names = {b.name.split(":")[0] for b in BLOCKS if b.runnable}
    assert {"README.md", "docs/working-memory.md"} <= names


@pytest.mark.parametrize(
    "block", [b for b in BLOCKS if b.runnable], ids=[b.name for b in BLOCKS if b.runnable]
)
def test_a_runnable_block_runs_offline_and_prints_what_the_docs_show(
    block: Block, tmp_path: Path
) -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"DASHSCOPE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"}
    }
    env["AGENTSCOPE_MEM0_DIR"] = str(tmp_path / "data")
    script = tmp_path / "example.py"
    script.write_text(block.code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    if block.output is not None:
        assert done.stdout.splitlines() == block.output.strip("\n").splitlines()
