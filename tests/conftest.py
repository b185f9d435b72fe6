"""Shared fixtures: every test gets its own data folder; mem0 is real."""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import tempfile

# mem0 writes $MEM0_DIR/config.json (by default ~/.mem0/config.json) the
# moment it is imported. The run gets a folder of its own before anything
# below imports mem0, so the suite never writes into the real home folder
# (tests/test_home.py checks it).
_MEM0_HOME = tempfile.mkdtemp(prefix="agentscope-mem0-tests-mem0-")
os.environ["MEM0_DIR"] = _MEM0_HOME
atexit.register(shutil.rmtree, _MEM0_HOME, True)

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import requests
from mem0 import AsyncMemory

from agentscope_mem0.local import close_shared_clients
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import FakePlatform, UniqueFacts, close_memory, real_memory


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Keep the embedded default (and mem0's own folder) inside the test's tmp_path."""
    folder = tmp_path / "data"
    monkeypatch.setenv("AGENTSCOPE_MEM0_DIR", str(folder))
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0-home"))
    yield folder
    close_shared_clients()


@pytest.fixture(autouse=True)
def _collector_not_frozen() -> Iterator[None]:
    """What an app's startup froze (``install(app)``) is given back to the
    garbage collector after the test, so that no test leaves it frozen."""
    yield
    gc.unfreeze()


@pytest.fixture
def embedding() -> HashEmbedding:
    return HashEmbedding()


@pytest.fixture
def chat_model() -> ScriptedChatModel:
    return ScriptedChatModel("OK.")


@pytest.fixture
def store_config(tmp_path: Path) -> dict[str, Any]:
    """mem0 config fields for an on-disk local Qdrant and history in tmp_path."""
    return {
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": "test",
                "path": str(tmp_path / "qdrant"),
                "on_disk": True,
            },
        },
        "history_db_path": str(tmp_path / "history.db"),
    }


@pytest.fixture
def memory(store_config: dict[str, Any]) -> Iterator[AsyncMemory]:
    """A real mem0 on the test's local Qdrant whose extraction tags every call's
    facts with a unique suffix (``UniqueFacts``), so a write stored twice shows."""
    mem = real_memory(store_config, ScriptedChatModel(extractor=UniqueFacts()))
    yield mem
    close_memory(mem)


@pytest.fixture
def platform(monkeypatch: pytest.MonkeyPatch) -> FakePlatform:
    """The fake platform; mem0's key check (a blocking ``requests.get``) goes to it too."""
    fake = FakePlatform()

    def get(url: str, *, headers: dict[str, str], params: Any = None, **_: Any) -> Any:
        answer = fake.handle(httpx.Request("GET", url, headers=headers, params=params))
        response = requests.models.Response()
        response.status_code = answer.status_code
        response._content = answer.content
        response.headers.update(answer.headers)
        response.url = url
        return response

    monkeypatch.setattr("mem0.client.main.requests.get", get)
    return fake
