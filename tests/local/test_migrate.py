"""A release-0.1 data folder moves onto Qdrant Edge on its first open.

Release 0.1's embedded store was mem0's own Qdrant provider on qdrant-client's
local mode in ``<folder>/qdrant/`` (collection ``agentscope_mem0``, history in
``<folder>/history.db``). Each test here writes such a folder the way 0.1
did, through mem0 on qdrant-client's local mode, and opens it the way a user
of this release does: ``build_local_memory``, a middleware, the command line.
Everything is real (mem0, qdrant-client, Qdrant Edge, SQLite) except the
models, which are the offline fakes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from agentscope_mem0 import (
    DimensionMismatchError,
    Mem0Middleware,
    MigrationError,
    StoreLockedError,
    build_local_memory,
    build_memory,
)
from agentscope_mem0.local import EdgeVectorStore, close_shared_clients, install_keyword_encoder
from agentscope_mem0.local._folder import COLLECTION, FolderLayout
from agentscope_mem0.local._migrate import MIGRATION_RECORD
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import shard_records

DIMS = 64
USERS = ("user-0", "user-1", "user-2")


def memory_on(folder: Path, dims: int = DIMS) -> Any:
    return build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(dims), folder=folder
    )


async def release_0_1_folder(folder: Path, count: int = 12) -> dict[str, list[str]]:
    """Write ``count`` memories as release 0.1's embedded default stored them.

    Returns:
        Each user's memory texts.
    """
    layout = FolderLayout(folder.resolve())
    memory = build_memory(
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(DIMS),
        mem0_config={
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": COLLECTION,
                    "path": str(layout.qdrant),
                    "on_disk": True,
                },
            },
            "history_db_path": str(layout.history_db),
        },
    )
    assert install_keyword_encoder(memory)  # 0.1 wrote keyword vectors too
    stored: dict[str, list[str]] = {user: [] for user in USERS}
    for i in range(count):
        user = USERS[i % len(USERS)]
        text = f"old fact {i} about item{i}"
        await memory.add([{"role": "user", "content": text}], user_id=user, infer=False)
        stored[user].append(text)
    memory.close()
    close_shared_clients(folder)
    assert (layout.qdrant / "collection" / COLLECTION).is_dir()
    assert not layout.edge.exists()
    return stored


def old_points(folder: Path) -> dict[str, tuple[dict[str, Any], list[float]]]:
    from qdrant_client import QdrantClient

    client = QdrantClient(path=str(folder / "qdrant"))
    try:
        records, _ = client.scroll(COLLECTION, limit=1000, with_payload=True, with_vectors=True)
    finally:
        client.close()
    return {
        str(r.id): (
            dict(r.payload or {}),
            list(r.vector[""] if isinstance(r.vector, dict) else r.vector),
        )
        for r in records
    }


def texts_of(result: Any) -> list[str]:
    return sorted(m["memory"] for m in result["results"])


def cli(*args: str) -> Any:
    from click.testing import CliRunner

    from agentscope_mem0.cli import cli

    env = {"AGENTSCOPE_MEM0_EMBEDDER": f"hash:{DIMS}", "AGENTSCOPE_MEM0_CHAT_MODEL": None}
    return CliRunner(env=env).invoke(cli, list(args), catch_exceptions=False)


async def test_a_release_0_1_folder_opens_with_everything_kept(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    await release_0_1_folder(folder)
    before = old_points(folder)
    assert len(before) == 12

    memory = memory_on(folder)  # the first open migrates
    assert isinstance(memory.vector_store, EdgeVectorStore)
    store = memory.vector_store
    assert store.count() == 12
    got = {h.id: h.payload for h in store.list(top_k=100)[0]}
    assert got == {mid: payload for mid, (payload, _) in before.items()}
    record = json.loads((folder / "edge" / MIGRATION_RECORD).read_text())
    assert record["points"][COLLECTION] == 12
    assert (folder / "qdrant" / "collection" / COLLECTION).is_dir()  # old files left alone
    found = await memory.search("item7", filters={"user_id": "user-1"}, top_k=1)
    assert found["results"][0]["memory"] == "old fact 7 about item7"

    close_shared_clients(folder)
    vectors = {str(r.id): r.vector[""] for r in shard_records(folder / "edge" / COLLECTION, DIMS)}
    for mid, (_, vector) in before.items():
        assert vectors[mid] == pytest.approx(vector, abs=1e-6)
    again = memory_on(folder)  # no second migration
    assert again.vector_store.count() == 12


async def test_a_middleware_on_a_release_0_1_folder_finds_every_memory(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    stored = await release_0_1_folder(folder, count=30)

    middleware = Mem0Middleware.local(
        user_id="user-0",
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(DIMS),
        folder=folder,
    )
    try:
        client = middleware.client
        assert isinstance(client.vector_store, EdgeVectorStore)
        for user, texts in stored.items():
            listed = await client.get_all(filters={"user_id": user}, top_k=100)
            assert texts_of(listed) == sorted(texts)
        found = await client.search("item13", filters={"user_id": "user-1"}, top_k=1)
        assert texts_of(found) == ["old fact 13 about item13"]
    finally:
        await middleware.aclose()
    assert (folder / "edge" / MIGRATION_RECORD).is_file()


def test_the_command_line_opens_a_release_0_1_folder_with_every_memory(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    stored = asyncio.run(release_0_1_folder(folder))  # the command runs a loop of its own

    status = cli("status", "--folder", str(folder), "--json")  # the first open migrates
    assert status.exit_code == 0, status.output
    backend = json.loads(status.stdout)["backend"]
    assert backend["engine"] == "qdrant-edge" and backend["memories"] == 12
    for user, texts in stored.items():
        listed = cli("list", "--folder", str(folder), "--user", user, "--json")
        assert listed.exit_code == 0, listed.output
        assert sorted(m["text"] for m in json.loads(listed.stdout)) == sorted(texts)


def test_migrate_command(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    asyncio.run(release_0_1_folder(folder))
    result = cli("migrate", "--folder", str(folder), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["migrated"] == {COLLECTION: 12}
    again = cli("migrate", "--folder", str(folder))
    assert again.exit_code == 0 and "nothing to migrate" in again.stderr
    assert "migrated before" in again.stderr
    assert memory_on(folder).vector_store.count() == 12


async def test_a_failed_migration_leaves_the_folder_as_it_was(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    await release_0_1_folder(folder)
    before = old_points(folder)
    blocker = folder / "edge.migrating"
    blocker.write_text("in the way")  # the copy cannot create its staging folder

    with pytest.raises(MigrationError, match="unchanged") as caught:
        memory_on(folder)
    assert "edge.migrating" in str(caught.value)
    assert "AGENTSCOPE_MEM0_ENGINE" not in str(caught.value)  # no retired engine offered
    assert not (folder / "edge").exists()
    assert old_points(folder) == before
    with pytest.raises(DimensionMismatchError, match=r"release-0\.1"):
        memory_on(folder, dims=32)

    blocker.unlink()
    assert memory_on(folder).vector_store.count() == 12


async def test_a_release_0_1_store_held_by_another_client_is_not_touched(
    tmp_path: Path,
) -> None:
    from qdrant_client import QdrantClient

    folder = tmp_path / "store"
    await release_0_1_folder(folder)
    before = old_points(folder)
    # Stands in for a process of an earlier release still serving the old store.
    holder = QdrantClient(path=str(folder / "qdrant"))
    try:
        with pytest.raises(StoreLockedError, match=r"release-0\.1 store") as caught:
            memory_on(folder)
        assert "AGENTSCOPE_MEM0_DIR" in str(caught.value)
        assert not (folder / "edge").exists() and not (folder / "edge.migrating").exists()
    finally:
        holder.close()
    assert old_points(folder) == before
    assert memory_on(folder).vector_store.count() == 12
