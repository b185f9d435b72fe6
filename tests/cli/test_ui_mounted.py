"""The inspector served by the service that owns the embedded folder.

A service holds its data folder, so ``agentscope-mem0 ui`` cannot open it;
``factory.mount_inspector(app)`` serves the inspector from the service, on its
own client, behind the same rules, and ``ui`` on the busy folder says where.
"""

from __future__ import annotations

import logging
import re
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from agentscope_mem0 import ConfigurationError
from agentscope_mem0.service import mem0_middleware_factory
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from command_line import run

TOKEN = "s3cret-token-for-tests-0123"


def _factory(folder: Path):  # type: ignore[no-untyped-def]
    return mem0_middleware_factory(
        chat_model=ScriptedChatModel("OK."), embedding_model=HashEmbedding(), folder=folder
    )


async def _remember(factory, user: str, text: str) -> None:  # type: ignore[no-untyped-def]
    client = await factory.get_client()
    await client.add(text, user_id=user, infer=False)


def test_the_service_serves_the_inspector_of_its_own_folder(tmp_path: Path) -> None:
    factory = _factory(tmp_path / "data")
    app = factory.mount_inspector(Starlette(), "/memory")
    with TestClient(
        app, base_url="http://127.0.0.1:8000", follow_redirects=False, client=("127.0.0.1", 5000)
    ) as client:
        client.portal.call(_remember, factory, "alice", "Alice drinks green tea.")
        home = client.get("/memory/")
        assert home.status_code == 200 and 'href="./?user=alice">alice' in home.text
        assert "Alice drinks green tea." in client.get("/memory/?user=alice").text
        # Without a token it answers only requests that name a loopback host.
        rebound = client.get("/memory/", headers={"Host": "evil.example"})
        assert rebound.status_code == 421
        client.portal.call(factory.aclose)
    # The folder notes who serves its inspector, for `agentscope-mem0 ui`.
    assert '"path": "/memory"' in (tmp_path / "data" / "inspector.json").read_text()


async def test_without_a_token_only_this_machine_is_answered(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A peer elsewhere is refused whatever Host it names (nginx's default names
    127.0.0.1), on reads and on /forget; the mount says so once."""
    factory = _factory(tmp_path / "data")
    with caplog.at_level(logging.WARNING, logger="agentscope_mem0"):
        app = factory.mount_inspector(Starlette(), "/memory")
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "loopback" in warning.getMessage() and "token" in warning.getMessage()
    assert "proxy" in warning.getMessage()
    await _remember(factory, "alice", "Alice drinks green tea.")

    def client(peer: str) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=app, client=(peer, 5000))
        return httpx.AsyncClient(transport=transport, base_url="http://localhost:8000")

    try:
        async with client("127.0.0.1") as local, client("203.0.113.5") as remote:
            page = await local.get("/memory/?user=alice")
            assert page.status_code == 200 and "green tea" in page.text
            secret = re.search(r'name="csrf" value="([^"]+)"', page.text)
            assert secret is not None
            (memory,) = (await (await factory.get_client()).get_all(filters={"user_id": "alice"}))[
                "results"
            ]
            form = {"memory_id": memory["id"], "user": "alice", "confirm": "yes"}
            for host in ("localhost", "127.0.0.1:8000"):
                read = await remote.get("/memory/?user=alice", headers={"Host": host})
                assert read.status_code == 403 and "green tea" not in read.text
                assert "token" in read.text
                # Even with the form's secret and its cookie, copied from this machine.
                remote.cookies = local.cookies
                forget = await remote.post(
                    "/memory/forget", data={**form, "csrf": secret.group(1)}, headers={"Host": host}
                )
                assert forget.status_code == 403
            # A proxy on this machine forwarding a request from elsewhere says so.
            forwarded = await local.get("/memory/", headers={"X-Forwarded-For": "203.0.113.5"})
            assert forwarded.status_code == 403
            # Still the DNS-rebinding check for a loopback peer naming another host.
            rebound = await local.get("/memory/", headers={"Host": "evil.example"})
            assert rebound.status_code == 421
        client_ = await factory.get_client()
        assert len((await client_.get_all(filters={"user_id": "alice"}))["results"]) == 1
    finally:
        await factory.aclose()


def test_with_a_token_every_request_carries_it(tmp_path: Path) -> None:
    factory = _factory(tmp_path / "data")
    app = factory.mount_inspector(Starlette(), "/memory", token=TOKEN)
    with TestClient(app, base_url="http://app.example", follow_redirects=False) as client:
        assert client.get("/memory/").status_code == 401
        opened = client.get(f"/memory/?token={TOKEN}")
        assert opened.status_code == 303 and opened.headers["location"] == "/memory/"
        assert client.get("/memory/").status_code == 200  # the cookie it set
        client.portal.call(factory.aclose)


def test_a_server_store_is_inspected_with_the_command_instead(tmp_path: Path) -> None:
    factory = mem0_middleware_factory(
        chat_model=ScriptedChatModel("OK."),
        embedding_model=HashEmbedding(),
        mem0_config={
            "vector_store": {
                "provider": "qdrant",
                "config": {"path": str(tmp_path / "q"), "collection_name": "m", "on_disk": True},
            },
            "history_db_path": str(tmp_path / "history.db"),
        },
    )
    with pytest.raises(ConfigurationError, match="agentscope-mem0 ui --config"):
        factory.mount_inspector(Starlette())


SERVICE = textwrap.dedent(
    """
    import sys, uvicorn
    from starlette.applications import Starlette
    from agentscope_mem0.service import mem0_middleware_factory
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    factory = mem0_middleware_factory(
        chat_model=ScriptedChatModel("OK."), embedding_model=HashEmbedding(), folder=sys.argv[1]
    )
    app = factory.install(factory.mount_inspector(Starlette(), "/memory"))
    uvicorn.run(app, host="127.0.0.1", port=0, log_level="info")
    """
)


def test_ui_on_a_folder_a_service_holds_says_where_its_inspector_is(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    child = subprocess.Popen(
        [sys.executable, "-c", SERVICE, str(folder)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert child.stdout is not None
        port = None
        for line in child.stdout:  # uvicorn says where it listens once it does
            found = re.search(r"Uvicorn running on http://127\.0\.0\.1:(\d+)", line)
            if found:
                port = int(found.group(1))
                break
        assert port is not None
        result = run("ui", "--folder", str(folder), "--port", "0")
        assert result.exit_code == 3, result.output
        url = f"http://127.0.0.1:{port}/memory/"
        assert f"is in use by pid {child.pid}" in result.stderr
        assert f"serves its inspector: open {url}" in result.stderr
        with urllib.request.urlopen(url, timeout=30) as answer:
            assert answer.status == 200 and "agentscope-mem0" in answer.read().decode()
    finally:
        child.terminate()
        child.wait(timeout=60)


class _AgentRecords:
    """agentscope.app's storage as the inspector reads it: one agent of alice's."""

    def __init__(self, agent_id: str, name: str) -> None:
        self.agent_id, self.name = agent_id, name

    async def get_agent(self, user_id: str, agent_id: str) -> object | None:
        from types import SimpleNamespace

        if (user_id, agent_id) != ("alice", self.agent_id):
            return None
        return SimpleNamespace(data=SimpleNamespace(name=self.name))


def test_agents_are_shown_by_the_name_the_apps_records_give(tmp_path: Path) -> None:
    app_id = "3f2b8c1e5d4a4c2b9e1f0a1b2c3d4e5f"  # how agentscope.app names an agent
    factory = _factory(tmp_path / "data")
    parent = Starlette()
    parent.state.storage = _AgentRecords(app_id, "Research Assistant")
    app = factory.mount_inspector(parent, "/memory")

    async def remember() -> str:
        client = await factory.get_client()
        done = await client.add(
            "Alice drinks green tea.", user_id="alice", agent_id=app_id, infer=False
        )
        return str(done["results"][0]["id"])

    with TestClient(
        app, base_url="http://127.0.0.1:8000", follow_redirects=False, client=("127.0.0.1", 5000)
    ) as client:
        memory_id = client.portal.call(remember)
        page = client.get("/memory/?user=alice").text
        named = f'<span class="agent" title="{app_id}">Research Assistant</span>'
        assert page.count(named) == 2  # the agent filter and the memory's row
        assert f">{app_id}<" not in page
        assert named in client.get(f"/memory/memory?id={memory_id}").text
        client.portal.call(factory.aclose)
