"""Starting is cheap: ``--help``, ``--version`` and ``import agentscope_mem0``
import none of agentscope, mem0 or qdrant (checked in a fresh interpreter's
``sys.modules``; the times are in docs/cli.md, not asserted here)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

import agentscope_mem0

HEAVY = ("agentscope", "mem0", "qdrant_client", "qdrant_edge", "numpy", "psycopg")


def _imported_after(code: str) -> dict[str, Any]:
    probe = (
        "import json, sys\n"
        f"{code}\n"
        f"heavy = {HEAVY!r}\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & set(heavy))))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return {"heavy": json.loads(done.stdout.strip().splitlines()[-1]), "stdout": done.stdout}


def _run_cli(*args: str) -> str:
    return (
        "import contextlib, io\n"
        "from agentscope_mem0.cli import main\n"
        f"sys.argv = ['agentscope-mem0', *{list(args)!r}]\n"
        "with contextlib.suppress(SystemExit):\n"
        "    main()\n"
    )


@pytest.mark.parametrize("args", [("--help",), ("--version",), ("-h",)])
def test_help_and_version_import_nothing_heavy(args: tuple[str, ...]) -> None:
    found = _imported_after(_run_cli(*args))
    assert found["heavy"] == [], found
    assert "agentscope-mem0" in found["stdout"]


def test_help_lists_commands_from_the_table_without_importing_them() -> None:
    found = _imported_after(_run_cli("--help"))
    from agentscope_mem0.cli._app import COMMANDS

    for name in COMMANDS:
        assert f"  {name} " in found["stdout"]


def test_every_commands_help_imports_nothing_heavy() -> None:
    from agentscope_mem0.cli._app import COMMANDS

    code = "\n".join(_run_cli(name, "--help") for name in COMMANDS)
    found = _imported_after(code)
    assert found["heavy"] == [], found
    assert found["stdout"].count("Usage: agentscope-mem0") == len(COMMANDS)


def test_import_agentscope_mem0_is_lazy() -> None:
    assert _imported_after("import agentscope_mem0")["heavy"] == []
    touched = _imported_after("import agentscope_mem0; agentscope_mem0.Mem0Middleware")
    assert {"agentscope", "mem0"} <= set(touched["heavy"])


def test_every_public_name_has_a_lazy_home() -> None:
    lazy = agentscope_mem0._LAZY
    assert set(lazy) == set(agentscope_mem0.__all__) - {"__version__"}
    for name in agentscope_mem0.__all__:
        assert getattr(agentscope_mem0, name) is not None
    assert set(agentscope_mem0.__all__) <= set(dir(agentscope_mem0))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        agentscope_mem0.nope  # noqa: B018
