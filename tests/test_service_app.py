"""Service mode end to end: ``demos/service_app.py`` under a real uvicorn on a
free localhost port, ``demos/service_client.py`` talking to it over HTTP.

Offline: no model key is set, so the app's agents use its keyless scripted
credential and mem0 extracts with the rule-based model; mem0, the embedded
store, the app's storage and the HTTP stack are real.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentscope_mem0 import Outbox
from agentscope_mem0._write.outbox import OUTBOX_FILENAME
from agentscope_mem0.service import mem0_middleware_factory
from agentscope_mem0.testing import ScriptedChatModel

ROOT = Path(__file__).resolve().parents[1]
KEYS = ("DASHSCOPE_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def service(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in KEYS}
    env["SERVICE_APP_DIR"] = str(tmp_path / "service")
    log = (tmp_path / "uvicorn.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "demos.service_app:app", "--port", str(port)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            if server.poll() is not None:
                break
            try:
                if httpx.get(f"{url}/docs", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.2)
        assert server.poll() is None, (tmp_path / "uvicorn.log").read_text()
        yield url, env
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()
    assert server.returncode == 0, (tmp_path / "uvicorn.log").read_text()
    # the memories live in the folder the app named, and its shutdown left no write pending
    memory = tmp_path / "service" / "memory"
    assert (memory / "history.db").is_file()
    outbox = Outbox(memory / OUTBOX_FILENAME)
    try:
        assert outbox.counts()["pending"] == 0
    finally:
        outbox.close()


def test_two_users_over_http_remember_their_own_facts(
    service: tuple[str, dict[str, str]],
) -> None:
    url, env = service
    done = subprocess.run(
        [sys.executable, str(ROOT / "demos" / "service_client.py"), "--url", url],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    alice = lines[
        lines.index("[alice, session 2] Where do I live, and what do I like to drink?") + 1
    ]
    bob = lines[lines.index("[bob, session 2] Where do I live, and what do I like to drink?") + 1]
    assert "Hangzhou" in alice and "green tea" in alice
    assert "Berlin" not in alice and "coffee" not in alice
    assert "Berlin" in bob and "black coffee" in bob
    # The app serves the memory inspector of its own folder, to this machine.
    page = httpx.get(f"{url}/memory-inspector/?user=alice", timeout=30)
    assert page.status_code == 200 and "Hangzhou" in page.text and "Berlin" not in page.text
    assert "Hangzhou" not in bob and "tea" not in bob
    assert "nothing recalled yet" in lines[1]  # session 1 started with no memory


async def test_the_factory_takes_a_folder_and_no_embedding_model(tmp_path: Path) -> None:
    factory = mem0_middleware_factory(chat_model=ScriptedChatModel(), folder=tmp_path / "data")
    try:
        (mw,) = await factory("alice", "agent-1", "session-1")
        client = await factory.get_client()
        assert mw.client is client
        assert (tmp_path / "data" / "history.db").is_file()  # the embedded store in that folder
        assert client.embedding_model.config.model.dimensions == 384  # the offline embedder
    finally:
        await factory.aclose()


def test_the_deploying_snippet_defines_every_name(tmp_path: Path) -> None:
    """docs/deploying.md's service-mode app builds as written (nothing is started)."""
    import re

    text = (ROOT / "docs" / "deploying.md").read_text(encoding="utf-8")
    section = text.split("## Service mode", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None
    check = code.group(1) + (
        "\nfrom agentscope_mem0.service import Mem0MiddlewareFactory\n"
        "assert isinstance(memory, Mem0MiddlewareFactory) and memory.client is None\n"
        "print(type(app).__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "FastAPI"
