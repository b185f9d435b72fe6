"""The public surface and mem0 hygiene."""

from __future__ import annotations

import os
import subprocess
import sys

import agentscope_mem0


def test_all_is_sorted_and_exported() -> None:
    names = agentscope_mem0.__all__
    assert names == sorted(names)
    assert len(names) == len(set(names))
    for name in names:
        assert hasattr(agentscope_mem0, name), name
    for required in ("Mem0Middleware", "build_mem0_config", "AgentScopeLLM", "AgentScopeEmbedding"):
        assert required in names


def _telemetry_flag(env: dict[str, str]) -> str:
    code = (
        "import agentscope_mem0, mem0.memory.telemetry as t, mem0.memory.main as m;"
        "print(t.MEM0_TELEMETRY, m.MEM0_TELEMETRY)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_telemetry_is_off_unless_the_user_chose() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MEM0_TELEMETRY"}
    assert _telemetry_flag(env) == "False False"
    assert _telemetry_flag({**env, "MEM0_TELEMETRY": "true"}) == "True True"


def test_telemetry_is_turned_off_even_if_mem0_was_imported_first() -> None:
    env = {k: v for k, v in os.environ.items() if k != "MEM0_TELEMETRY"}
    code = (
        "import mem0.memory.main as m; import agentscope_mem0;"
        "import mem0.memory.telemetry as t; print(t.MEM0_TELEMETRY, m.MEM0_TELEMETRY,"
        " t.client_telemetry.posthog)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    # The hosted client's PostHog client, built when mem0 was imported, is dropped too.
    assert out.stdout.strip() == "False False None"


def _run_at_home(home: str, code: str, **extra: str) -> tuple[list[str], str]:
    """Run ``code`` with ``home`` as HOME; what mem0's folder holds after, and the output."""
    env = {k: v for k, v in os.environ.items() if k not in ("MEM0_TELEMETRY", "MEM0_DIR")}
    env.update(HOME=home, **extra)
    run = subprocess.run(
        [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
    )
    folder = os.path.join(home, ".mem0")
    return (sorted(os.listdir(folder)) if os.path.isdir(folder) else []), run.stdout


def test_mem0_writes_no_id_file_when_telemetry_is_off(tmp_path: object) -> None:
    home = str(tmp_path)
    # A real write and search through mem0 on the embedded store, as a user runs it.
    code = (
        "import sys; from agentscope_mem0.cli import cli;"
        f"folder = {os.path.join(home, 'data')!r};"
        "cli.main(['add', '--folder', folder, '--user', 'u', '--raw', 'I drink green tea'],"
        " standalone_mode=False);"
        "cli.main(['search', '--folder', folder, '--user', 'u', 'tea'], standalone_mode=False)"
    )
    files, output = _run_at_home(home, code)
    assert "green tea" in output
    assert "config.json" not in files


def test_the_id_file_is_left_to_mem0_when_the_user_turned_telemetry_on(tmp_path: object) -> None:
    code = "import agentscope_mem0, mem0"
    assert _run_at_home(str(tmp_path), code, MEM0_TELEMETRY="true")[0] == ["config.json"]


def test_the_id_file_is_left_to_mem0_when_mem0_came_first(tmp_path: object) -> None:
    code = "import mem0, agentscope_mem0"
    assert _run_at_home(str(tmp_path), code)[0] == ["config.json"]
