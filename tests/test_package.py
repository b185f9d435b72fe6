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
