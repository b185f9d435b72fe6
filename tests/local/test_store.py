"""The embedded store: one shared Qdrant Edge shard per folder, history in WAL mode;
an on-disk Qdrant path named in a ``mem0_config``: one shared, locked client per path.

Everything here is real (mem0 AsyncMemory, Qdrant Edge, qdrant-client's local
mode, SQLite) except the models, which are the offline fakes.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import agentscope_mem0
from agentscope_mem0 import (
    ConfigurationError,
    DimensionMismatchError,
    Mem0Middleware,
    StoreLockedError,
    build_local_memory,
    build_mem0_config,
    build_memory,
)
from agentscope_mem0.local import (
    EDGE_PROVIDER,
    LockedQdrantClient,
    close_shared_clients,
    embedded_store_config,
    share_local_qdrant,
)
from agentscope_mem0.local._edge import SharedShard, shared_shard
from agentscope_mem0.local._folder import COLLECTION, HISTORY_BUSY_TIMEOUT, FolderLayout
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

CHILD = Path(__file__).parents[1] / "_store_child.py"
DIMS = 64


@pytest.fixture(autouse=True)
def _close_stores() -> Iterator[None]:
    yield
    close_shared_clients()


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "store"


def local_memory(folder: Path, dims: int = DIMS) -> Any:
    return build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(dims), folder=folder
    )


def run_child(*args: str) -> dict[str, Any]:
    """Run tests/_store_child.py in a new interpreter; return its JSON answer."""
    env = dict(os.environ)
    src = str(Path(agentscope_mem0.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, str(CHILD), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def memories_of(result: Any) -> list[dict[str, Any]]:
    return result["results"] if isinstance(result, dict) else list(result)


async def test_concurrent_adds_and_deletes_stay_deleted_after_restart(
    folder: Path, caplog: pytest.LogCaptureFixture
) -> None:
    memory = local_memory(folder)
    users = [f"user-{u}" for u in range(30)]

    with caplog.at_level(logging.WARNING):
        added = await asyncio.gather(
            *(
                memory.add(
                    [{"role": "user", "content": f"fact {i} about {user}"}],
                    user_id=user,
                    infer=False,
                )
                for user in users
                for i in range(10)
            ),
            return_exceptions=True,
        )
        assert [r for r in added if isinstance(r, BaseException)] == []
        stored = await asyncio.gather(*(memory.get_all(filters={"user_id": u}) for u in users))
        assert [len(memories_of(r)) for r in stored] == [10] * 30

        deleted = await asyncio.gather(
            *(memory.delete_all(user_id=u) for u in users), return_exceptions=True
        )
        assert [r for r in deleted if isinstance(r, BaseException)] == []

    # mem0 2.2's delete_all logs failed deletes instead of raising them.
    failures = [r.getMessage() for r in caplog.records if r.name.startswith("mem0")]
    assert not [m for m in failures if "delete" in m.lower()], failures
    left = await asyncio.gather(*(memory.get_all(filters={"user_id": u}) for u in users))
    assert sum(len(memories_of(r)) for r in left) == 0

    close_shared_clients(folder)
    reopened = run_child("count", str(FolderLayout.of(folder).edge / COLLECTION))
    assert reopened == {"points": 0, "collection": True}


async def test_two_middlewares_in_one_process_share_the_folder(
    _data_dir: Path,
) -> None:
    # conftest points AGENTSCOPE_MEM0_DIR at _data_dir: the middlewares' default folder.
    alice = Mem0Middleware(
        user_id="alice", chat_model=ScriptedChatModel(), embedding_model=HashEmbedding(DIMS)
    )
    bob = Mem0Middleware(
        user_id="bob", chat_model=ScriptedChatModel(), embedding_model=HashEmbedding(DIMS)
    )
    try:
        shared = alice.client.vector_store.shard
        assert isinstance(shared, SharedShard)
        assert bob.client.vector_store.shard is shared
        assert shared is shared_shard(FolderLayout.of(_data_dir).edge / COLLECTION, DIMS)

        await asyncio.gather(
            alice.client.add([{"role": "user", "content": "I live in Hangzhou."}], user_id="alice"),
            bob.client.add([{"role": "user", "content": "I prefer tea."}], user_id="bob"),
        )
        found_by_bob = await bob.client.search(
            "where does alice live", filters={"user_id": "alice"}
        )
        assert [m["memory"] for m in memories_of(found_by_bob)] == ["User lives in Hangzhou."]
        found_by_alice = await alice.client.search(
            "what does bob drink", filters={"user_id": "bob"}
        )
        assert [m["memory"] for m in memories_of(found_by_alice)] == ["User prefers tea."]
    finally:
        await alice.aclose()
        await bob.aclose()


def qdrant_path_config(path: str | Path, dims: int = DIMS) -> Any:
    """A mem0 config naming mem0's Qdrant provider on an on-disk path."""
    from mem0.configs.base import MemoryConfig

    return MemoryConfig(
        vector_store={
            "provider": "qdrant",
            "config": {"collection_name": "mine", "path": str(path), "embedding_model_dims": dims},
        }
    )


def shared_client_of(path: str | Path) -> Any:
    return share_local_qdrant(qdrant_path_config(path)).vector_store.config.client


def test_path_spellings_share_one_client(folder: Path, tmp_path: Path) -> None:
    folder.mkdir()
    first = shared_client_of(folder)
    link = tmp_path / "link"
    link.symlink_to(folder)
    assert shared_client_of(link) is first
    assert shared_client_of(f"{folder}/.") is first
    # mem0 deep-copies its vector-store config; the folder lock must not be copied.
    assert copy.deepcopy(first) is first


@pytest.mark.parametrize("store", ["embedded", "qdrant path"])
def test_second_process_gets_a_clear_store_locked_error(folder: Path, store: str) -> None:
    if store == "embedded":
        embedded_store_config(dims=DIMS, folder=folder)
        answer = run_child("open", str(folder))
    else:
        shared_client_of(folder)
        answer = run_child("open-path", str(folder))

    assert answer["error"] == "StoreLockedError"
    assert answer["store_locked"] and answer["value_error"]
    message = answer["message"]
    assert str(folder.resolve()) in message
    # The holder is named as the command line names it: pid and command.
    assert f"in use by another process, pid {os.getpid()} (" in message
    assert "pytest" in message or "python" in message
    assert "\n" not in message  # one paragraph
    assert "Qdrant server" in message
    assert "AGENTSCOPE_MEM0_DIR" in message
    assert "already accessed by another instance" not in message
    assert "WouldBlock" not in message


def test_store_locked_error_is_raised_in_process_too(folder: Path) -> None:
    from qdrant_client import QdrantClient

    # A client this package did not create holds the path.
    outsider = QdrantClient(path=str(folder))
    try:
        with pytest.raises(StoreLockedError, match="one process at a time"):
            shared_client_of(folder)
    finally:
        outsider.close()
    assert isinstance(shared_client_of(folder), LockedQdrantClient)


async def test_dims_mismatch_with_an_existing_collection_is_clear(
    folder: Path, _data_dir: Path
) -> None:
    memory = local_memory(folder, dims=DIMS)
    await memory.add([{"role": "user", "content": "hello"}], user_id="u", infer=False)

    with pytest.raises(DimensionMismatchError) as caught:
        local_memory(folder, dims=32)
    message = str(caught.value)
    assert f"{COLLECTION!r}" in message
    assert "32-dimensional" in message and f"{DIMS}-dimensional" in message
    assert "another data folder" in message

    # Through the middleware, on its default folder, it is a ValueError too.
    Mem0Middleware(user_id="u", chat_model=ScriptedChatModel(), embedding_model=HashEmbedding(DIMS))
    with pytest.raises(ValueError, match="16-dimensional"):
        Mem0Middleware(
            user_id="u", chat_model=ScriptedChatModel(), embedding_model=HashEmbedding(16)
        )


async def test_history_db_lives_in_the_folder_in_wal_mode(folder: Path) -> None:
    memory = local_memory(folder)
    history = folder.resolve() / "history.db"
    assert Path(memory.config.history_db_path) == history

    added = await memory.add([{"role": "user", "content": "hello"}], user_id="u", infer=False)
    memory_id = memories_of(added)[0]["id"]

    probe = sqlite3.connect(history)
    try:
        assert probe.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        rows = probe.execute(
            "SELECT event FROM history WHERE memory_id = ?", (memory_id,)
        ).fetchall()
    finally:
        probe.close()
    assert rows == [("ADD",)]
    (timeout_ms,) = memory.db.connection.execute("PRAGMA busy_timeout").fetchone()
    assert timeout_ms == int(HISTORY_BUSY_TIMEOUT * 1000)


def test_embedded_store_config_opens_the_shared_edge_store(folder: Path) -> None:
    fields = embedded_store_config(dims=DIMS, folder=folder)
    assert fields["vector_store"]["provider"] == EDGE_PROVIDER
    store = fields["vector_store"]["config"]
    assert store["path"] == str(folder.resolve() / "edge")
    assert store["embedding_model_dims"] == DIMS
    shard = shared_shard(folder / "edge" / COLLECTION, DIMS)
    assert not shard.closed and shard.path == folder.resolve() / "edge" / COLLECTION
    assert Path(fields["history_db_path"]).parent == folder.resolve()


def test_the_retired_engine_switch_is_refused_with_what_to_do(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTSCOPE_MEM0_ENGINE", "qdrant-local")
    with pytest.raises(ConfigurationError) as caught:
        local_memory(folder)
    message = str(caught.value)
    assert "AGENTSCOPE_MEM0_ENGINE='qdrant-local'" in message
    assert "retired" in message and "Unset AGENTSCOPE_MEM0_ENGINE" in message
    assert "first open" in message  # a release-0.1 folder still migrates
    assert not folder.exists()  # refused before anything was opened
    with pytest.raises(ConfigurationError, match="retired"):
        Mem0Middleware(user_id="u", chat_model=ScriptedChatModel(), embedding_model=HashEmbedding())

    monkeypatch.setenv("AGENTSCOPE_MEM0_ENGINE", "edge")  # the one engine: nothing to refuse
    assert local_memory(folder).vector_store.count() == 0


async def test_closed_client_fails_clearly_and_the_folder_reopens(folder: Path) -> None:
    memory = local_memory(folder)
    close_shared_clients(folder)

    with pytest.raises(RuntimeError, match="was closed"):
        await memory.get_all(filters={"user_id": "u"})

    again = local_memory(folder)
    await again.add([{"role": "user", "content": "hello"}], user_id="u", infer=False)
    assert len(memories_of(await again.get_all(filters={"user_id": "u"}))) == 1


async def test_a_user_config_with_a_local_path_gets_the_shared_client(tmp_path: Path) -> None:
    path = tmp_path / "own-qdrant"
    user_config = {
        "vector_store": {
            "provider": "qdrant",
            "config": {"collection_name": "mine", "path": str(path), "on_disk": True},
        },
        "history_db_path": str(tmp_path / "history.db"),
    }

    def memory(dims: int = DIMS) -> Any:
        return build_memory(
            chat_model=ScriptedChatModel(),
            embedding_model=HashEmbedding(dims),
            mem0_config=user_config,
        )

    # the config only describes the store; building the client opens it, shared
    described = build_mem0_config(
        chat_model=ScriptedChatModel(), embedding_model=HashEmbedding(DIMS), mem0_config=user_config
    )
    assert described.vector_store.config.client is None and not path.exists()
    first, second = memory(), memory()  # a second plain client here would hit the folder lock
    assert "client" not in user_config["vector_store"]["config"]  # the input is left alone
    assert first.vector_store.client is second.vector_store.client
    assert isinstance(first.vector_store.client, LockedQdrantClient)
    await first.add([{"role": "user", "content": "hello"}], user_id="u", infer=False)
    assert len(memories_of(await second.get_all(filters={"user_id": "u"}))) == 1

    with pytest.raises(DimensionMismatchError, match="'mine'"):
        memory(dims=8)


def test_server_configs_are_left_alone() -> None:
    from mem0.configs.base import MemoryConfig

    config = MemoryConfig(
        vector_store={
            "provider": "qdrant",
            "config": {"collection_name": "c", "host": "localhost", "port": 6333},
        }
    )
    assert share_local_qdrant(config) is config
