"""``status``, ``retry-failed`` and ``ui`` find the outbox the middleware used for a store.

Without ``outbox`` the middleware keeps a server store's outbox next to
mem0's history database (see ``agentscope_mem0._write.outbox``), and a
pgvector store's in a table of its database (``<collection>_outbox``); the CLI,
opened on the same store with ``--config``, must see and requeue those writes.
Real mem0 on a real PostgreSQL with pgvector; only the chat model is scripted.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import UserMsg
from mem0 import AsyncMemory
from starlette.testclient import TestClient

from _pgfixture import fresh_collection
from agentscope_mem0 import (
    ClientState,
    ConfigurationError,
    Mem0Backend,
    Mem0Middleware,
    RetryPolicy,
    WriteQueue,
    build_memory,
)
from agentscope_mem0._mem0.clients import close_memory
from agentscope_mem0._write.outbox import default_outbox_dir
from agentscope_mem0.backends import pgvector_config
from agentscope_mem0.cli._config import load_settings
from agentscope_mem0.cli._mem0_store import open_store
from agentscope_mem0.cli.ui._web import create_app
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from command_line import run, run_json

FAST = RetryPolicy(max_attempts=2, initial_delay=0.01, max_delay=0.05)
PROSE = "Sure! I will remember that the user lives in Lyon."
GOOD = '{"memory": [{"id": "0", "text": "User lives in Lyon", "attributed_to": "user"}]}'


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    from _pgfixture import postgres_dsn

    with postgres_dsn() as dsn:
        yield dsn


def _memory(fields: dict[str, Any], answer: str) -> AsyncMemory:
    return build_memory(
        chat_model=ScriptedChatModel(answer, extractor=None),
        embedding_model=HashEmbedding(),
        mem0_config=fields,
    )


async def _one_turn(fields: dict[str, Any], answer: str, text: str) -> dict[str, int]:
    """An agent's reply through a middleware on ``fields``; the writer's stats after."""
    memory = _memory(fields, answer)
    queue = WriteQueue(Mem0Backend(memory), retry=FAST)
    state = ClientState(
        memory, parameters=Mem0Middleware.Parameters(judge=False), write_queue=queue
    )
    mw = Mem0Middleware(user_id="alice", client_state=state, mode="static_control")
    try:
        agent: Any = Agent(
            name="assistant", system_prompt="", model=ScriptedChatModel("Noted."), middlewares=[mw]
        )
        await agent.reply(UserMsg(name="user", content=text))
        assert await queue.flush(30)
        return dict(queue.stats())
    finally:
        await mw.aclose()
        await state.aclose()
        await queue.aclose()
        close_memory(memory)


async def _replay(fields: dict[str, Any]) -> list[str]:
    """The next writer on the store, with a model answering mem0's JSON: its stored texts."""
    memory = _memory(fields, GOOD)
    queue = WriteQueue(Mem0Backend(memory), retry=FAST)
    try:
        assert await queue.flush(30)
        raw = await memory.get_all(filters={"user_id": "alice"}, top_k=100)
        return [item["memory"] for item in raw["results"]]
    finally:
        await queue.aclose()
        close_memory(memory)


def _toml(path: Path, dsn: str, collection: str, extra: str = "") -> Path:
    path.write_text(
        f'backend = "pgvector"\ndsn = "{dsn}"\ncollection = "{collection}"\n{extra}',
        encoding="utf-8",
    )
    return path


def _status_outbox(config: Path) -> dict[str, Any]:
    report = run_json("status", "--config", str(config))
    return dict(report["outbox"])


def test_status_and_retry_failed_see_a_pgvector_stores_failed_write(
    pg_dsn: str, tmp_path: Path
) -> None:
    collection = fresh_collection("ob")
    history = tmp_path / "app" / "history.db"
    history.parent.mkdir()
    fields = pgvector_config(
        pg_dsn,
        dims=HashEmbedding().dimensions,
        collection=collection,
        max_connections=3,  # a tunable: not part of where the outbox is
        history_db_path=str(history),
    )
    stats = asyncio.run(_one_turn(fields, PROSE, "I live in Lyon."))
    assert (stats["writes_failed"], stats["writes_stored"]) == (1, 0)

    config = _toml(tmp_path / "pg.toml", pg_dsn, collection, 'history_db = "app/history.db"\n')
    outbox = _status_outbox(config)
    assert (outbox["pending"], outbox["failed"]) == (0, 1), outbox
    # A pgvector store's writes wait in a table of its own database.
    assert outbox["path"].endswith(f"(table {collection}_outbox)"), outbox
    (failed,) = outbox["failed_writes"]
    assert failed["user_id"] == "alice" and "not mem0's JSON" in failed["error"]
    assert "retry-failed" in run("status", "--config", str(config)).stdout
    # The inspector's outbox page reads the same rows.
    store = open_store(load_settings(config_path=config))
    try:
        client = TestClient(
            create_app(store, token=None),
            base_url="http://127.0.0.1",
            client=("127.0.0.1", 50000),
        )
        page = client.get("/outbox").text
    finally:
        store.close()
    failed_rows = page.split('id="failed"')[1]
    assert "Failed (1)" in page and "alice" in failed_rows and "Lyon" in failed_rows

    assert run_json("retry-failed", "--config", str(config)) == {"requeued": 1, "sent": False}
    assert (_status_outbox(config)["pending"], _status_outbox(config)["failed"]) == (1, 0)
    # The application's next writer, its model answering properly, stores it once.
    assert asyncio.run(_replay(fields)) == ["User lives in Lyon"]
    assert (_status_outbox(config)["pending"], _status_outbox(config)["failed"]) == (0, 0)
    assert asyncio.run(_replay(fields)) == ["User lives in Lyon"]  # nothing replayed twice


def test_retry_failed_send_with_the_history_in_the_data_folder(
    pg_dsn: str, tmp_path: Path, _data_dir: Path
) -> None:
    # No history_db_path anywhere: both put mem0's history in the store's
    # database and the outbox in the data folder, away from the vector store.
    collection = fresh_collection("ob")
    fields = pgvector_config(pg_dsn, dims=HashEmbedding().dimensions, collection=collection)
    stats = asyncio.run(_one_turn(fields, PROSE, "I live in Lyon."))
    assert stats["writes_failed"] == 1

    config = _toml(tmp_path / "pg.toml", pg_dsn, collection)
    outbox = _status_outbox(config)
    assert outbox["failed"] == 1
    assert outbox["path"].endswith(f"(table {collection}_outbox)"), outbox

    result = run("retry-failed", "--send", "--json", "--config", str(config))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["requeued"], report["stored"], report["outbox"]) == (
        1,
        1,
        {"pending": 0, "failed": 0},
    )
    assert [m["text"] for m in run_json("list", "--user", "alice", "--config", str(config))] == [
        "User lives in Lyon."
    ]


def test_the_cli_and_the_writer_pick_one_folder_for_each_backend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from mem0.configs.base import MemoryConfig

    dsn = "postgresql://u:secret@db.example:5433/mem"
    config = _toml(tmp_path / "pg.toml", dsn, "facts", 'history_db = "h/history.db"\n')
    cli_place = load_settings(config_path=config).outbox
    # The user's own config spells the same table differently: separate fields,
    # another vector size and pool, another password.
    user = MemoryConfig(
        vector_store={
            "provider": "pgvector",
            "config": {
                "host": "db.example",
                "port": 5433,
                "dbname": "mem",
                "user": "u",
                "password": "rotated",
                "collection_name": "facts",
                "embedding_model_dims": 1024,
                "maxconn": 20,
            },
        },
        history_db_path=str(tmp_path / "h" / "history.db"),
    )
    assert default_outbox_dir(SimpleNamespace(config=user)) == cli_place
    other = _toml(tmp_path / "other.toml", dsn, "notes", 'history_db = "h/history.db"\n')
    assert load_settings(config_path=other).outbox != cli_place

    # Qdrant server: host/port from the URL, the collection names the store.
    qdrant = tmp_path / "q.toml"
    qdrant.write_text(
        'backend = "qdrant"\nurl = "http://qd.example:6333"\ncollection = "facts"\n'
        'history_db = "h/history.db"\n',
        encoding="utf-8",
    )
    qdrant_user = MemoryConfig(
        vector_store={
            "provider": "qdrant",
            "config": {"host": "qd.example", "port": 6333, "collection_name": "facts"},
        },
        history_db_path=str(tmp_path / "h" / "history.db"),
    )
    assert load_settings(config_path=qdrant).outbox == default_outbox_dir(
        SimpleNamespace(config=qdrant_user)
    )

    # Hosted: the folder of the host and the key's hash, as for mem0's client.
    import hashlib

    from agentscope_mem0._write.outbox import hosted_outbox_dir

    monkeypatch.setenv("MEM0_API_KEY", "m0-key")
    hosted = tmp_path / "hosted.toml"
    hosted.write_text('backend = "hosted"\n', encoding="utf-8")
    assert load_settings(config_path=hosted).outbox == hosted_outbox_dir(
        "https://api.mem0.ai", hashlib.md5(b"m0-key").hexdigest()
    )

    # An explicit outbox still wins; release 0.3's key names the new one.
    pinned = _toml(tmp_path / "pin.toml", dsn, "facts", 'outbox = "mine"\n')
    assert load_settings(config_path=pinned).outbox == tmp_path / "mine"
    old = _toml(tmp_path / "old.toml", dsn, "facts", 'outbox_dir = "mine"\n')
    with pytest.raises(ConfigurationError, match="now 'outbox'"):
        load_settings(config_path=old)
