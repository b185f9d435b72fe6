"""``agentscope-mem0 migrate --to URL``: an embedded folder copied into Qdrant collections.

The target is qdrant-client's local mode (``QdrantClient(path=...)``), which
speaks the same API as a server; no Qdrant server runs here. The folder is a
real embedded store (Qdrant Edge) written through mem0 with the offline fakes.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from mem0 import AsyncMemory
from qdrant_client import QdrantClient

from agentscope_mem0 import MigrationError, build_local_memory, build_mem0_config
from agentscope_mem0._mem0.backend import Mem0Backend
from agentscope_mem0._scope import Scope
from agentscope_mem0._server import copy as copy_module
from agentscope_mem0._server.copy import copy_folder, progress_file
from agentscope_mem0._server.qdrant_config import PROVIDER
from agentscope_mem0.local import close_shared_clients
from agentscope_mem0.local._edge import DENSE, SPARSE
from agentscope_mem0.local._folder import COLLECTION
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from command_line import run
from fakes import shard_records

DIMS = 64
WORDS = "tea hiking chess violins kayaks ramen tango Kyoto sourdough beekeeping"
FACTS = [f"Fact {i}: the user likes {word}" for i, word in enumerate(WORDS.split())]


def seed(folder: Path) -> None:
    async def fill() -> None:
        memory = build_local_memory(
            ScriptedChatModel(), embedding_model=HashEmbedding(DIMS), folder=folder
        )
        backend = Mem0Backend(memory)
        for i, fact in enumerate(FACTS):
            user = "alice" if i % 2 else "bob"
            await backend.add([{"role": "user", "content": fact}], Scope(user), infer=False)

    asyncio.run(fill())
    close_shared_clients()


def folder_points(folder: Path) -> dict[str, Any]:
    return {str(r.id): r for r in shard_records(folder / "edge" / COLLECTION, DIMS)}


class Recording:
    """A client that counts the points upserted and can fail after some calls."""

    def __init__(self, inner: QdrantClient, fail_after: int | None = None) -> None:
        self.inner = inner
        self.fail_after = fail_after
        self.upserted = 0
        self.calls = 0

    def upsert(self, name: str, points: list[Any], **kwargs: Any) -> Any:
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise ConnectionError("the server went away")
        self.upserted += len(points)
        return self.inner.upsert(name, points=points, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    seed(path)
    return path


def test_every_point_arrives_whole(folder: Path, tmp_path: Path) -> None:
    client = QdrantClient(path=str(tmp_path / "server"))
    reports = copy_folder(folder, client, target="http://q:6333")
    close_shared_clients()
    report = reports[COLLECTION]
    assert (report.points, report.copied, report.verified, report.recopied) == (10, 10, 10, 0)
    source = folder_points(folder)
    copied = {
        str(p.id): p
        for p in client.scroll(COLLECTION, limit=100, with_payload=True, with_vectors=True)[0]
    }
    assert sorted(copied) == sorted(source)
    for point_id, record in source.items():
        there = copied[point_id]
        assert there.payload == record.payload
        assert there.vector[DENSE] == pytest.approx(list(record.vector[DENSE]), abs=1e-6)
        sparse = there.vector[SPARSE]
        assert dict(zip(sparse.indices, sparse.values, strict=True)) == pytest.approx(
            dict(zip(record.vector[SPARSE].indices, record.vector[SPARSE].values, strict=True))
        )
    client.close()


async def test_the_server_provider_finds_what_the_folder_found(
    folder: Path, tmp_path: Path
) -> None:
    client = QdrantClient(path=str(tmp_path / "server"))
    copy_folder(folder, client, target="http://q:6333")
    client.close()
    close_shared_clients()
    edge = build_local_memory(
        ScriptedChatModel(), embedding_model=HashEmbedding(DIMS), folder=folder
    )
    server = AsyncMemory(
        config=build_mem0_config(
            chat_model=ScriptedChatModel(),
            embedding_model=HashEmbedding(DIMS),
            mem0_config={
                "vector_store": {
                    "provider": PROVIDER,
                    "config": {
                        "collection_name": COLLECTION,
                        "embedding_model_dims": DIMS,
                        "path": str(tmp_path / "server"),
                    },
                },
                "history_db_path": str(tmp_path / "history.db"),
            },
        )
    )
    # (The fake embedding's cosines tie, so only the unambiguous first hit is compared.)
    for word, user in (("chess", "bob"), ("sourdough", "bob"), ("Kyoto", "alice")):
        here = await Mem0Backend(edge).search(f"{word}?", Scope(user), top_k=3)
        there = await Mem0Backend(server).search(f"{word}?", Scope(user), top_k=3)
        assert word in there[0].memory and there[0].id == here[0].id


def test_an_interrupted_copy_carries_on(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(copy_module, "BATCH", 3)
    inner = QdrantClient(path=str(tmp_path / "server"))
    failing = Recording(inner, fail_after=2)
    with pytest.raises(ConnectionError):
        copy_folder(folder, failing, target="http://q:6333")
    close_shared_clients()
    record = json.loads(progress_file(folder, "http://q:6333", COLLECTION).read_text())
    assert record[COLLECTION]["done"] is False and record[COLLECTION]["offset"] is not None
    assert inner.count(COLLECTION).count == 6

    again = Recording(inner)
    reports = copy_folder(folder, again, target="http://q:6333")
    report = reports[COLLECTION]
    assert report.copied == 4 and report.verified == 10 and report.recopied == 0
    assert inner.count(COLLECTION).count == 10
    inner.close()


def test_a_point_changed_on_the_server_is_sent_again(folder: Path, tmp_path: Path) -> None:
    client = QdrantClient(path=str(tmp_path / "server"))
    copy_folder(folder, client, target="http://q:6333")
    close_shared_clients()
    point = next(iter(folder_points(folder)))
    client.set_payload(COLLECTION, payload={"data": "tampered"}, points=[point])
    client.delete(COLLECTION, points_selector=[next(reversed(folder_points(folder)))])

    report = copy_folder(folder, client, target="http://q:6333")[COLLECTION]
    assert (report.copied, report.recopied, report.verified) == (0, 2, 10)
    [restored] = client.retrieve(COLLECTION, ids=[point], with_payload=True)
    assert restored.payload["data"] != "tampered"
    client.close()


def test_a_server_that_keeps_changing_points_is_an_error(folder: Path, tmp_path: Path) -> None:
    class DropsKeywords(Recording):
        def upsert(self, name: str, points: list[Any], **kwargs: Any) -> Any:
            for point in points:
                point.vector.pop(SPARSE, None)
            return super().upsert(name, points, **kwargs)

    client = DropsKeywords(QdrantClient(path=str(tmp_path / "server")))
    with pytest.raises(MigrationError, match="still differ"):
        copy_folder(folder, client, target="http://q:6333")
    client.inner.close()


def test_a_collection_of_another_size_is_refused(folder: Path, tmp_path: Path) -> None:
    from qdrant_client import models

    client = QdrantClient(path=str(tmp_path / "server"))
    client.create_collection(
        COLLECTION, vectors_config=models.VectorParams(size=8, distance=models.Distance.COSINE)
    )
    with pytest.raises(MigrationError, match="8-dimensional"):
        copy_folder(folder, client, target="http://q:6333")
    client.close()


def test_migrate_to_on_the_command_line(
    folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentscope_mem0.cli import _maintenance

    seen: list[tuple[str, str | None]] = []

    def local_server(url: str, api_key: str | None) -> QdrantClient:
        seen.append((url, api_key))
        return QdrantClient(path=str(tmp_path / "server"))

    monkeypatch.setattr(_maintenance, "server_client", local_server)
    monkeypatch.setenv("MY_KEY", "secret")
    result = run(
        "migrate",
        "--folder",
        str(folder),
        "--to",
        "http://q.example:6333",
        "--collection",
        "mem",
        "--api-key-env",
        "MY_KEY",
        "--json",
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["collection"] == "mem" and answer[COLLECTION]["verified"] == 10
    assert seen == [("http://q.example:6333", "secret")]
    client = QdrantClient(path=str(tmp_path / "server"))
    assert client.count("mem").count == 10
    client.close()

    text = run(
        "migrate", "--folder", str(folder), "--to", "http://q.example:6333", "--collection", "mem"
    )
    assert text.exit_code == 0 and "0 sent this run" in text.stdout and "10 checked" in text.stdout
    bad = run("migrate", "--folder", str(folder), "--to", "q.example:6333")
    assert bad.exit_code == 2 and "http" in bad.stderr
    lonely = run("migrate", "--folder", str(folder), "--collection", "mem")
    assert lonely.exit_code == 2 and "--to" in lonely.stderr


def test_an_unreachable_server_exits_3(folder: Path) -> None:
    result = run("migrate", "--folder", str(folder), "--to", "http://127.0.0.1:1")
    assert result.exit_code == 3, result.output
    assert not progress_file(folder, "http://127.0.0.1:1", COLLECTION).exists()
