"""Working-memory stores: SQLite (embedded), PostgreSQL (pgvector), Qdrant.

SQLite and PostgreSQL are real, hammered by real processes and threads. A
Qdrant server cannot run here: the Qdrant store runs on qdrant-client's local
mode, which implements the same conditional-upsert API, under real threads.
"""

from __future__ import annotations

import gc
import json
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from _pgfixture import fresh_collection, postgres_dsn
from agentscope_mem0 import InvalidStateError, SqliteWorkingStore, WorkingRecord, WorkingStore
from agentscope_mem0._profile.record import load_profile, save_profile
from agentscope_mem0._working.format import WorkingFormat
from agentscope_mem0._working.stores import WORKING_THREAD, store_for_client
from fakes import load_working

CHILD = Path(__file__).parents[1] / "_working_child.py"
JSON = WorkingFormat(schema={"type": "object"})


def _append(store: WorkingStore, user: str, value: dict[str, Any], conversation: str = "") -> Any:
    def change(old: WorkingRecord | None) -> str:
        return JSON.apply(old.content if old else None, value, "append")

    return store.update(user, conversation, change, kind="json")


def _contract(store: WorkingStore) -> None:
    """What every store must do, in one sequence."""
    assert store.load("ann") is None
    first = _append(store, "ann", {"name": "Ann", "tags": ["a"]})
    assert first.version == 1 and first.kind == "json" and first.user_id == "ann"
    second = _append(store, "ann", {"tags": ["a", "b"], "city": {"now": "Oslo"}})
    assert second.version == 2
    loaded = store.load("ann")
    assert loaded is not None and loaded.version == 2
    assert json.loads(loaded.content) == {
        "name": "Ann",
        "tags": ["a", "b"],
        "city": {"now": "Oslo"},
    }
    # Scopes keep apart: another user, and a conversation of the same user.
    assert store.load("bob") is None
    _append(store, "ann", {"step": 1}, conversation="s1")
    assert json.loads(store.load("ann", "s1").content) == {"step": 1}  # type: ignore[union-attr]
    assert "step" not in json.loads(store.load("ann").content)  # type: ignore[union-attr]
    assert store.conversations("ann") == ["s1"]

    # A change that raises leaves the record as it was.
    def bad(old: WorkingRecord | None) -> str:
        raise ValueError("no")

    with pytest.raises(ValueError):
        store.update("ann", "", bad, kind="json")
    assert store.load("ann").version == 2  # type: ignore[union-attr]
    # Clearing keeps the record, empty, with a new version; absent stays absent.
    cleared = store.clear("ann")
    assert cleared is not None and cleared.content == "" and cleared.version == 3
    assert store.load("ann").content == ""  # type: ignore[union-attr]
    assert store.clear("nobody") is None and store.load("nobody") is None
    # The user's profile is a record of its own kind in the same store, no conversation.
    save_profile(store, "ann", "- Works as a nurse")
    store.update("ann", "chat-1", lambda old: "notes", kind="text")
    assert sorted(store.conversations("ann")) == ["chat-1", "s1"]
    assert load_profile(store, "ann").content == "- Works as a nurse"  # type: ignore[union-attr]
    store.close()


def _race(make_store: Callable[[], WorkingStore], *, threads: int, each: int) -> dict[str, Any]:
    """``threads`` writers, each with its own store object, appending at once."""
    barrier = threading.Barrier(threads)
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        store = make_store()
        try:
            barrier.wait()
            for index in range(each):
                _append(store, "ann", {"items": [f"{worker}-{index}"]})
        except BaseException as exc:  # surfaced below
            errors.append(exc)
        finally:
            store.close()

    pool = [threading.Thread(target=work, args=(w,)) for w in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert not errors, errors
    store = make_store()
    record = store.load("ann")
    store.close()
    assert record is not None
    return {"version": record.version, **json.loads(record.content)}


# -- SQLite ---------------------------------------------------------------------


def test_sqlite_contract(tmp_path: Path) -> None:
    _contract(SqliteWorkingStore(tmp_path))
    assert (tmp_path / "working_memory.sqlite3").exists()


async def test_sqlite_connection_lives_on_one_thread_and_closes(tmp_path: Path) -> None:
    store = SqliteWorkingStore(tmp_path)
    assert not list(tmp_path.iterdir())  # nothing opened before the first call
    _append(store, "ann", {"name": "Ann"})
    record = await store.run(store.load, "ann")
    assert record is not None and json.loads(record.content) == {"name": "Ann"}
    assert await store.run(threading.current_thread) is not threading.current_thread()
    assert (await store.run(threading.current_thread)).name == WORKING_THREAD
    with pytest.raises(sqlite3.ProgrammingError, match="same thread"):
        store._connection().execute("SELECT 1")  # SQLite's own check: no other thread
    store.close()
    store.close()  # idempotent
    with pytest.raises(InvalidStateError, match=r"working_memory\.sqlite3 is closed"):
        store.load("ann")


def test_a_sqlite_store_nobody_closed_warns(tmp_path: Path) -> None:
    store = SqliteWorkingStore(tmp_path)
    assert store.load("ann") is None
    with pytest.warns(ResourceWarning, match=r"working_memory\.sqlite3 was not closed"):
        del store
        gc.collect()


def test_sqlite_threads_lose_no_update(tmp_path: Path) -> None:
    result = _race(lambda: SqliteWorkingStore(tmp_path), threads=8, each=10)
    assert result["version"] == 80
    assert sorted(result["items"]) == sorted(f"{w}-{i}" for w in range(8) for i in range(10))


def test_sqlite_processes_lose_no_update(tmp_path: Path) -> None:
    children = [
        subprocess.Popen(
            [sys.executable, str(CHILD), "sqlite", str(tmp_path), "ann", f"p{w}", "15"]
        )
        for w in range(4)
    ]
    assert [c.wait(timeout=120) for c in children] == [0] * 4
    record = load_working(tmp_path, "ann")
    assert record is not None and record.version == 60
    value = json.loads(record.content)
    assert sorted(value["items"]) == sorted(f"p{w}-{i}" for w in range(4) for i in range(15))
    assert value["by"] == {f"p{w}": 14 for w in range(4)}


def test_embedded_client_gets_sqlite_beside_history(store_config: dict[str, Any]) -> None:
    from fakes import real_memory

    memory = real_memory(store_config)
    store = store_for_client(memory)
    assert isinstance(store, SqliteWorkingStore)
    assert store.path == Path(store_config["history_db_path"]).parent / "working_memory.sqlite3"


def test_embedded_default_keeps_it_in_the_data_folder(_data_dir: Path) -> None:
    from agentscope_mem0 import Mem0Middleware
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    mw = Mem0Middleware.local(
        user_id="ann", chat_model=ScriptedChatModel(), embedding_model=HashEmbedding()
    )
    store = store_for_client(mw.client)
    assert isinstance(store, SqliteWorkingStore)
    assert store.path.parent == mw.folder


# -- PostgreSQL -----------------------------------------------------------------


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn() as dsn:
        yield dsn


def test_postgres_contract(pg_dsn: str) -> None:
    from agentscope_mem0 import PostgresWorkingStore

    _contract(PostgresWorkingStore(pg_dsn, table=fresh_collection("w")))


def test_postgres_store_reopens_a_dropped_connection_once(pg_dsn: str) -> None:
    import psycopg

    from agentscope_mem0 import PostgresWorkingStore

    store = PostgresWorkingStore(pg_dsn, table=fresh_collection("w"))
    try:
        _append(store, "ann", {"city": "Paris"})
        pid = store._run(lambda conn: conn.info.backend_pid)
        with psycopg.connect(pg_dsn, autocommit=True) as admin:  # a restart, a failover
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        _append(store, "ann", {"city": "Lyon"})
        record = store.load("ann")
        assert record is not None and record.version == 2
        assert store._run(lambda conn: conn.info.backend_pid) != pid
    finally:
        store.close()


def test_postgres_store_out_of_reach_raises_the_packages_error() -> None:
    from agentscope_mem0 import BackendError, PostgresWorkingStore

    # Nothing listens on port 9: the connection itself fails, which is a
    # BackendError as a failing statement is, not psycopg's own error.
    store = PostgresWorkingStore("postgresql://nobody@127.0.0.1:9/none", timeout=1)
    with pytest.raises(BackendError, match="working memory in PostgreSQL table"):
        store.load("ann")
    store.close()


def test_postgres_threads_and_processes_lose_no_update(pg_dsn: str) -> None:
    from agentscope_mem0 import PostgresWorkingStore

    table = fresh_collection("w")
    children = [
        subprocess.Popen(
            [sys.executable, str(CHILD), "postgres", pg_dsn, "ann", f"p{w}", "10", table]
        )
        for w in range(3)
    ]
    result = _race(lambda: PostgresWorkingStore(pg_dsn, table=table), threads=6, each=10)
    assert [c.wait(timeout=120) for c in children] == [0] * 3
    record = PostgresWorkingStore(pg_dsn, table=table).load("ann")
    assert record is not None and record.version == 90
    items = json.loads(record.content)["items"]
    expected = {f"{w}-{i}" for w in range(6) for i in range(10)}
    expected |= {f"p{w}-{i}" for w in range(3) for i in range(10)}
    assert sorted(items) == sorted(expected)
    assert result["version"] >= 60


async def test_pgvector_client_gets_a_table_beside_mem0s(pg_dsn: str, tmp_path: Path) -> None:
    from mem0 import AsyncMemory

    from agentscope_mem0 import PostgresWorkingStore, build_mem0_config
    from agentscope_mem0.backends import pgvector_config
    from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

    collection = fresh_collection()
    config = pgvector_config(
        pg_dsn, dims=64, collection=collection, history_db_path=str(tmp_path / "h.db")
    )
    memory = AsyncMemory(
        config=build_mem0_config(
            chat_model=ScriptedChatModel(),
            embedding_model=HashEmbedding(64),
            mem0_config=config,
        )
    )
    store = store_for_client(memory)
    assert isinstance(store, PostgresWorkingStore)
    assert store.table == f"{collection}_working"
    _append(store, "ann", {"name": "Ann"})
    import psycopg

    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(f'SELECT user_id, version FROM "{collection}_working"').fetchall()
    assert rows == [("ann", 1)]
    store.close()

    # Through the middleware: one agent's tool call, another agent's next turn.
    from agentscope.agent import Agent
    from agentscope.message import HintBlock, UserMsg
    from agentscope.state import AgentState

    from agentscope_mem0 import Mem0Middleware, WorkingMemory

    options = WorkingMemory(scope="user", schema={"type": "object"})
    parameters = Mem0Middleware.Parameters(working_memory=options)
    writer = Mem0Middleware(user_id="ann", client=memory, parameters=parameters)
    tool = {t.name: t for t in await writer.list_tools()}["update_working_memory"]
    await tool(content='{"seat": "aisle"}', _agent_state=AgentState())
    model = ScriptedChatModel("Hi.")
    reader = Mem0Middleware(user_id="ann", client=memory, parameters=parameters)
    bot = Agent(name="concierge", system_prompt="", model=model, middlewares=[reader])
    await bot.reply(UserMsg("user", "hi"))
    hints = [str(b.hint) for m in model.calls[0] for b in m.content if isinstance(b, HintBlock)]
    block = next(h for h in hints if "<working_memory>" in h)
    inside = block.split("<working_memory>\n", 1)[1].rsplit("\n</working_memory>", 1)[0]
    assert json.loads(inside) == {"name": "Ann", "seat": "aisle"}  # merged, both kept
    await writer.aclose()
    await reader.aclose()


# -- Qdrant ---------------------------------------------------------------------


class _Serialised:
    """qdrant-client's local mode is not thread-safe: one call at a time, as a
    server would order them; the store's read-merge-write still interleaves."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return method(*args, **kwargs)

        return call


def test_qdrant_contract(tmp_path: Path) -> None:
    from qdrant_client import QdrantClient

    from agentscope_mem0 import QdrantWorkingStore

    client = QdrantClient(path=str(tmp_path / "qdrant"))  # qdrant-client's local mode, on disk
    try:
        _contract(QdrantWorkingStore(client, collection="m_working"))
    finally:
        client.close()


def test_qdrant_compare_and_set_loses_no_update(tmp_path: Path) -> None:
    from qdrant_client import QdrantClient

    from agentscope_mem0 import QdrantWorkingStore

    client = QdrantClient(path=str(tmp_path / "qdrant"))
    shared = _Serialised(client)
    try:
        result = _race(
            lambda: QdrantWorkingStore(shared, collection="m_working"), threads=6, each=8
        )
    finally:
        client.close()
    assert result["version"] == 48
    assert sorted(result["items"]) == sorted(f"{w}-{i}" for w in range(6) for i in range(8))


def test_qdrant_server_config_selects_the_qdrant_store(tmp_path: Path) -> None:
    """The selection for a Qdrant server, without a server: the server config
    (the package's provider, or mem0's own) and a real (unconnected) remote client."""
    from qdrant_client import QdrantClient

    from agentscope_mem0 import QdrantWorkingStore, build_mem0_config
    from agentscope_mem0.backends import qdrant_server_config

    server = qdrant_server_config("http://qdrant.invalid:6333", dims=8)
    config = build_mem0_config(mem0_config=server)
    assert config.vector_store.provider == "agentscope_qdrant"  # the package's provider
    remote = QdrantClient(host="qdrant.invalid", port=6333, check_compatibility=False)
    client = SimpleNamespace(config=config, vector_store=SimpleNamespace(client=remote))
    store = store_for_client(client)
    assert isinstance(store, QdrantWorkingStore)
    assert store.collection == "agentscope_mem0_working" and store.client is remote
    own = build_mem0_config(
        mem0_config=qdrant_server_config("http://qdrant.invalid:6333", dims=8, hybrid=False)
    )
    client = SimpleNamespace(config=own, vector_store=SimpleNamespace(client=remote))
    assert isinstance(store_for_client(client), QdrantWorkingStore)
    local = SimpleNamespace(
        config=config, vector_store=SimpleNamespace(client=QdrantClient(":memory:"))
    )
    assert isinstance(store_for_client(local, folder=tmp_path), SqliteWorkingStore)


def test_hosted_client_uses_the_local_data_folder(_data_dir: Path) -> None:
    from mem0 import AsyncMemoryClient

    hosted = AsyncMemoryClient.__new__(AsyncMemoryClient)  # no network: no __init__
    store = store_for_client(hosted)
    assert isinstance(store, SqliteWorkingStore) and store.path.parent == _data_dir.resolve()
