"""The inspector served by the service that owns the embedded folder.

A service holds its data folder, so ``agentscope-mem0 ui`` cannot open it;
``factory.mount_inspector(app)`` serves the inspector from the service, on its
own client, behind the same rules, and ``ui`` on the busy folder says where.
"""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

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
    with TestClient(app, base_url="http://127.0.0.1:8000", follow_redirects=False) as client:
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
