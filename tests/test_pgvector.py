"""Mem0Middleware on a real PostgreSQL with pgvector.

The server comes from ``AGENTSCOPE_MEM0_TEST_PG_DSN`` (``.ci/run`` starts one)
or is started here from the ``pgserver`` wheel; see ``tests/_pgfixture.py``.
Models are the offline fakes; mem0, psycopg and PostgreSQL are real.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import ToolResultState, UserMsg

from _pgfixture import fresh_collection, postgres_dsn
from agentscope_mem0 import (
    ConfigurationError,
    DimensionMismatchError,
    Mem0Backend,
    Mem0Middleware,
    Scope,
)
from agentscope_mem0.backends import pgvector_config, prepare_pgvector
from agentscope_mem0.service import mem0_middleware_factory
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import BusyEmbedding, note_text, one_session

DIMS = 128
WORKER = Path(__file__).with_name("_pg_worker.py")


@pytest.fixture(scope="module")
def pg_dsn() -> Iterator[str]:
    with postgres_dsn() as dsn:
        yield dsn


@pytest.fixture
def pg_config(pg_dsn: str, tmp_path: Path) -> dict[str, Any]:
    """A pgvector config on a table of this test's own, schema prepared."""
    config = pgvector_config(
        pg_dsn,
        dims=DIMS,
        collection=fresh_collection(),
        history_db_path=str(tmp_path / "history.db"),
    )
    prepare_pgvector(config)
    return config


def _sql(dsn: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return conn.execute(query, params).fetchall()


def _table(config: dict[str, Any]) -> str:
    return config["vector_store"]["config"]["collection_name"]


def _rows(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Every memory row's payload, straight from PostgreSQL."""
    dsn = config["vector_store"]["config"]["connection_string"]
    return [row[0] for row in _sql(dsn, f'SELECT payload FROM "{_table(config)}"')]


def _middleware(config: dict[str, Any], user_id: str, **kwargs: Any) -> Mem0Middleware:
    kwargs.setdefault("mode", "static_control")
    return Mem0Middleware(
        user_id=user_id,
        chat_model=ScriptedChatModel("Noted."),
        embedding_model=HashEmbedding(DIMS),
        mem0_config=config,
        parameters=Mem0Middleware.Parameters(search_timeout=30),
        **kwargs,
    )


async def test_second_session_remembers_the_first(pg_config: dict[str, Any]) -> None:
    mw = _middleware(pg_config, "alice")
    await one_session(mw, "I live in Hangzhou. My cat is called Mochi.")
    assert await mw.flush(timeout=30)
    stored = {row["data"] for row in _rows(pg_config)}
    assert stored == {"User lives in Hangzhou.", "User's cat is called Mochi."}

    # A new process would build a new middleware: nothing is shared but the database.
    later = _middleware(pg_config, "alice")
    model = await one_session(later, "Where do I live, and what is my cat called?")
    note = note_text(model.calls[0])
    assert "User lives in Hangzhou." in note
    assert "User's cat is called Mochi." in note
    await mw.aclose()
    await later.aclose()


async def test_tools_store_and_find_on_pgvector(pg_config: dict[str, Any]) -> None:
    mw = _middleware(pg_config, "alice", mode="agent_control")
    model = ScriptedChatModel("OK.")
    bot = Agent(name="planner", system_prompt="You plan.", model=model, middlewares=[mw])
    await bot.reply(UserMsg(name="user", content="Hello."))  # binds the agent
    tools = {tool.name: tool for tool in await mw.list_tools()}
    assert set(tools) == {"search_memory", "add_memory"}

    added = await tools["add_memory"].call(
        thinking="a durable preference",
        content=["The user's favourite tea is longjing."],
        _agent_state=bot.state,
    )
    assert added.state == ToolResultState.SUCCESS
    rows = _rows(pg_config)
    assert [(r["data"], r["user_id"], r["agent_id"]) for r in rows] == [
        ("The user's favourite tea is longjing.", "alice", "planner")
    ]

    found = await tools["search_memory"].call(keywords=["favourite tea"], _agent_state=bot.state)
    assert found.state == ToolResultState.SUCCESS
    assert "longjing" in found.content[0].text
    # agent_control writes nothing by itself.
    assert len(_rows(pg_config)) == 1
    await mw.aclose()


async def test_delete_and_delete_all(pg_config: dict[str, Any]) -> None:
    alice = _middleware(pg_config, "alice", await_write=True)
    bob = _middleware(pg_config, "bob", await_write=True)
    await one_session(alice, "I live in Hangzhou.")
    await one_session(alice, "My cat is called Mochi.")
    await one_session(bob, "I live in Lisbon.")

    client = alice.client
    memories = (await client.get_all(filters={"user_id": "alice"}))["results"]
    home = next(m for m in memories if "Hangzhou" in m["memory"])
    await client.delete(home["id"])
    assert {r["data"] for r in _rows(pg_config) if r["user_id"] == "alice"} == {
        "User's cat is called Mochi."
    }
    model = await one_session(alice, "Where is my home and what about my cat?")
    assert "Hangzhou" not in note_text(model.calls[0])
    assert "Mochi" in note_text(model.calls[0])

    await client.delete_all(user_id="alice")
    assert [r["data"] for r in _rows(pg_config)] == ["User lives in Lisbon."]
    model = await one_session(alice, "Tell me about my cat")
    assert note_text(model.calls[0]) == ""
    await alice.aclose()
    await bob.aclose()


async def test_users_and_agents_never_see_each_other(pg_config: dict[str, Any]) -> None:
    alice = _middleware(pg_config, "alice", await_write=True)
    bob = _middleware(pg_config, "bob", await_write=True)
    await one_session(alice, "I live in Hangzhou.")
    await one_session(bob, "I live in Lisbon.")
    await one_session(alice, "I prefer green tea.", agent="cook")
    await one_session(alice, "I prefer running at dawn.", agent="coach")

    # The same question, worded to match the other user's fact exactly.
    note = note_text((await one_session(alice, "Who lives in Lisbon?")).calls[0])
    assert "Hangzhou" in note and "Lisbon" not in note
    note = note_text((await one_session(bob, "Who lives in Hangzhou?")).calls[0])
    assert "Lisbon" in note and "Hangzhou" not in note

    # One user, two agents: each agent sees only its own memories by default ...
    note = note_text((await one_session(alice, "What do I prefer?", agent="cook")).calls[0])
    assert "green tea" in note and "running" not in note
    # ... and everything about the user when asked to.
    wide = _middleware(pg_config, "alice", scope_search_by_agent=False)
    note = note_text((await one_session(wide, "What do I prefer?", agent="cook")).calls[0])
    assert "green tea" in note and "running" in note
    for mw in (alice, bob, wide):
        await mw.aclose()


def test_prepare_creates_hnsw_index_and_ef_search_applies(pg_dsn: str) -> None:
    with_index = pgvector_config(pg_dsn, dims=DIMS, collection=fresh_collection(), ef_search=120)
    without = pgvector_config(pg_dsn, dims=DIMS, collection=fresh_collection(), hnsw=False)
    for config in (with_index, without, with_index):  # the second run is a no-op
        prepare_pgvector(config)

    def indexes(table: str) -> list[str]:
        return [
            row[0]
            for row in _sql(pg_dsn, "SELECT indexdef FROM pg_indexes WHERE tablename = %s", table)
        ]

    assert any("USING hnsw" in d and "vector_cosine_ops" in d for d in indexes(_table(with_index)))
    assert not any("hnsw" in d for d in indexes(_table(without)))
    assert any("hnsw" in d for d in indexes(f"{_table(with_index)}_entities"))
    for table in (_table(with_index), _table(without), f"{_table(without)}_entities"):
        assert any("'user_id'" in d and "'agent_id'" in d for d in indexes(table)), table
    for table in (_table(with_index), _table(without)):  # the memories' words, for the searches
        assert any("gin" in d and "to_tsvector('english'" in d for d in indexes(table)), table
    column = _sql(
        pg_dsn,
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = %s::regclass AND attname = 'vector'",
        _table(with_index),
    )
    assert column == [(f"vector({DIMS})",)]
    dsn = with_index["vector_store"]["config"]["connection_string"]
    assert _sql(dsn, "SHOW hnsw.ef_search") == [("120",)]


def test_wrong_dimensions_fail_at_construction(pg_dsn: str) -> None:
    config = pgvector_config(pg_dsn, dims=DIMS * 2, collection=fresh_collection())
    with pytest.raises(DimensionMismatchError, match=f"embedding_model_dims={DIMS}"):
        _middleware(config, "alice")


def test_four_processes_share_one_store(pg_dsn: str, tmp_path: Path) -> None:
    from _pg_worker import canary, user_name

    workers, users, conversations = 4, 5, 50
    collection = fresh_collection("mp")
    salt = uuid.uuid4().hex[:6]
    started = time.monotonic()
    procs = []
    for worker in range(workers):
        job = {
            "worker": worker,
            "workers": workers,
            "users": users,
            "conversations": conversations,
            "salt": salt,
            "dims": DIMS,
            "dsn": pg_dsn,
            "collection": collection,
            "folder": str(tmp_path),
        }
        # Files, not pipes: a full pipe would stall a worker at a barrier.
        out = (tmp_path / f"out-{worker}.txt").open("w")
        err = (tmp_path / f"err-{worker}.txt").open("w")
        procs.append(
            (
                subprocess.Popen(
                    [sys.executable, str(WORKER), json.dumps(job)], stdout=out, stderr=err
                ),
                out,
                err,
            )
        )
    reports = []
    for worker, (proc, out, err) in enumerate(procs):
        code = proc.wait(timeout=240)
        out.close()
        err.close()
        stderr = (tmp_path / f"err-{worker}.txt").read_text()
        assert code == 0, f"worker {worker} failed:\n{stderr[-4000:]}"
        reports.append(json.loads((tmp_path / f"out-{worker}.txt").read_text().splitlines()[-1]))
    elapsed = time.monotonic() - started

    for report in reports:
        assert report["flushed"], report
        assert report["log_problems"] == [], report
        assert report["missing"] == [], report  # it read everything the others wrote
        assert report["noted"] and all(report["noted"].values()), report
    # The write phases overlapped: every worker started before any finished.
    assert max(r["writes_started"] for r in reports) < min(r["writes_finished"] for r in reports)

    # Every conversation is stored exactly once, under the right user.
    rows = _rows(pgvector_config(pg_dsn, dims=DIMS, collection=collection))
    assert len(rows) == workers * conversations
    tokens = Counter()
    for row in rows:
        match = re.search(r"cx\w+", row["data"])
        assert match, row
        tokens[match.group(0)] += 1
        worker, user = map(int, re.search(r"w(\d+)u(\d+)c", match.group(0)).groups())
        assert row["user_id"] == user_name(worker, user)
    expected = {
        canary(salt, w, u, c)
        for w in range(workers)
        for u in range(users)
        for c in range(conversations // users)
    }
    assert set(tokens) == expected
    assert set(tokens.values()) == {1}
    print(f"4 processes x {conversations} conversations: {elapsed:.1f} s")


# -- the documented configs (no server needed) -------------------------------

DOCS = Path(__file__).resolve().parents[1] / "docs" / "backends.md"
DOCKER = Path(__file__).resolve().parents[1] / "docker"


def _build(mem0_config: dict[str, Any], dims: int = DIMS) -> Any:
    from agentscope_mem0 import build_mem0_config

    return build_mem0_config(
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(dims),
        mem0_config=mem0_config,
    )


def _documented_configs() -> list[str]:
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), re.S)
    return [block for block in blocks if "mem0_config = " in block]


@pytest.mark.parametrize("index", range(3))
def test_documented_configs_build_a_memory_config(index: int) -> None:
    snippets = _documented_configs()
    assert len(snippets) == 3  # pgvector, Qdrant server, Qdrant with a key
    namespace: dict[str, Any] = {"embedding_model": HashEmbedding(384)}
    exec(snippets[index], namespace)
    config = _build(namespace["mem0_config"], dims=384)
    store = config.vector_store.config
    assert config.vector_store.provider in {"pgvector", "agentscope_qdrant"}
    assert store.embedding_model_dims == 384
    assert config.llm.provider == config.embedder.provider == "agentscope"


def test_documented_addresses_match_the_compose_files() -> None:
    yaml = pytest.importorskip("yaml")
    postgres = yaml.safe_load((DOCKER / "pgvector-compose.yml").read_text())["services"]
    qdrant = yaml.safe_load((DOCKER / "qdrant-compose.yml").read_text())["services"]
    env = postgres["postgres"]["environment"]
    assert "127.0.0.1:5432:5432" in postgres["postgres"]["ports"]
    assert postgres["postgres"]["volumes"][0].endswith(":/var/lib/postgresql/data")
    assert {"127.0.0.1:6333:6333", "127.0.0.1:6334:6334"} <= {
        p.split("#")[0].strip() for p in qdrant["qdrant"]["ports"]
    }
    assert qdrant["qdrant"]["volumes"] == ["qdrant_storage:/qdrant/storage"]
    docs = DOCS.read_text()
    password = env["POSTGRES_PASSWORD"].split(":-")[-1].rstrip("}")
    dsn = f"postgresql://{env['POSTGRES_USER']}:{password}@localhost:5432/{env['POSTGRES_DB']}"
    assert dsn in docs
    assert '"http://localhost:6333"' in docs


def test_pgvector_config_fields() -> None:
    config = _build(pgvector_config("postgresql://u:p@db:5432/mem0", dims=DIMS))
    store = config.vector_store.config
    assert config.vector_store.provider == "pgvector"
    assert store.connection_string == "postgresql://u:p@db:5432/mem0"
    assert (store.collection_name, store.hnsw, store.diskann) == ("agentscope_mem0", True, False)
    assert (store.minconn, store.maxconn) == (1, 5)
    assert "history_db_path" not in pgvector_config("postgresql://x/db", dims=8)
    assert (
        pgvector_config("postgresql://x/db", dims=8, history_db_path="/h.db")["history_db_path"]
        == "/h.db"
    )


def test_ef_search_keeps_the_options_already_in_the_dsn() -> None:
    pytest.importorskip("psycopg")
    from psycopg.conninfo import conninfo_to_dict

    config = pgvector_config(
        "postgresql://u@db/mem0?options=-c%20statement_timeout%3D5000", dims=8, ef_search=64
    )
    parsed = conninfo_to_dict(config["vector_store"]["config"]["connection_string"])
    assert parsed["options"] == "-c statement_timeout=5000 -c hnsw.ef_search=64"
    assert (parsed["host"], parsed["dbname"], parsed["user"]) == ("db", "mem0", "u")


def test_a_config_for_other_dimensions_is_refused() -> None:
    with pytest.raises(DimensionMismatchError):
        _build(pgvector_config("postgresql://x/db", dims=DIMS + 1))
    from agentscope_mem0.backends import qdrant_server_config

    with pytest.raises(DimensionMismatchError):
        _build(qdrant_server_config("http://q:6333", dims=DIMS + 1))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"dsn": ""}, "connection string"),
        ({"dims": 0}, "dims"),
        ({"dims": True}, "dims"),
        ({"collection": "memories; DROP TABLE x"}, "identifier"),
        ({"collection": "c" * 35}, "at most 34"),
        ({"ef_search": 0}, "ef_search"),
        ({"min_connections": 3, "max_connections": 2}, "min_connections"),
    ],
)
def test_pgvector_config_refuses_what_cannot_work(kwargs: dict[str, Any], message: str) -> None:
    from agentscope_mem0 import ConfigurationError

    args = {"dsn": "postgresql://x/db", "dims": 8, **kwargs}
    with pytest.raises(ConfigurationError, match=message):
        pgvector_config(args.pop("dsn"), **args)


def test_qdrant_server_config_with_and_without_a_key() -> None:
    from agentscope_mem0 import ConfigurationError
    from agentscope_mem0.backends import qdrant_server_config

    plain = _build(qdrant_server_config("http://qdrant:6333", dims=DIMS)).vector_store.config
    assert (plain.host, plain.port, plain.https, plain.url, plain.api_key) == (
        "qdrant",
        6333,
        False,
        None,
        None,
    )
    keyed = _build(
        qdrant_server_config("https://q.example:6333", dims=DIMS, api_key="k", collection="mem")
    ).vector_store.config
    assert (keyed.url, keyed.api_key, keyed.collection_name) == (
        "https://q.example:6333",
        "k",
        "mem",
    )
    tls = qdrant_server_config("https://q.example", dims=DIMS)["vector_store"]["config"]
    assert (tls["port"], tls["https"]) == (443, True)
    for bad in ("", "localhost:6333", "qdrant", "ftp://q:21"):
        with pytest.raises(ConfigurationError, match="http"):
            qdrant_server_config(bad, dims=DIMS)


async def test_a_refused_query_is_answered_by_any_of_its_words(
    pg_config: dict[str, Any],
) -> None:
    # The embedder refuses the reply's query (busy): PostgreSQL's full-text search
    # finds the user's memories by any word of the question, stemmed ("lives" for
    # "live"), and only the user's.
    embedder = BusyEmbedding(DIMS)
    mw = Mem0Middleware(
        user_id="alice",
        chat_model=ScriptedChatModel("Noted."),
        embedding_model=embedder,
        mem0_config=pg_config,
        mode="static_control",
        parameters=Mem0Middleware.Parameters(search_timeout=30, judge=False),
    )
    async with mw:
        for user, text in (
            ("alice", "User lives in Hangzhou."),
            ("alice", "User's cat is called Mochi."),
            ("bob", "User lives in Lisbon."),
        ):
            await mw.client.add(
                [{"role": "user", "content": text}], user_id=user, agent_id="a", infer=False
            )
        model = ScriptedChatModel("Sure.")
        agent = Agent(name="a", system_prompt="x", model=model, middlewares=[mw])
        await agent.reply(UserMsg("user", "Where do I live now?"))
        note = note_text(model.calls[0])
        assert "Hangzhou" in note and "Lisbon" not in note and "Mochi" not in note, note
        assert mw.stats()["searches_by_keywords_alone"] == 1
        # A question sharing no word with any memory finds nothing, as it should.
        model = ScriptedChatModel("Sure.")
        agent = Agent(name="a", system_prompt="x", model=model, middlewares=[mw])
        await agent.reply(UserMsg("user", "Anything about the weather?"))
        assert "Hangzhou" not in note_text(model.calls[0])
        assert mw.stats()["searches_by_keywords_alone"] == 2


class SameVectorEmbedding(HashEmbedding):
    """Every text the same vector: meaning tells no memory from another."""

    def vector(self, text: str) -> list[float]:
        return [1.0] + [0.0] * (self.dimensions - 1)


async def test_a_search_ranks_by_words_where_meaning_cannot_tell(
    pg_config: dict[str, Any],
) -> None:
    # The fused search: with every cosine equal, the memory that shares the
    # question's words ("allergic") comes first.
    mw = Mem0Middleware(
        user_id="alice",
        chat_model=ScriptedChatModel("Noted."),
        embedding_model=SameVectorEmbedding(DIMS),
        mem0_config=pg_config,
        mode="static_control",
        top_k=2,
        parameters=Mem0Middleware.Parameters(search_timeout=30, judge=False),
    )
    async with mw:
        texts = [f"User's note number {i} is about the garden." for i in range(12)]
        for text in [*texts, "User is allergic to peanuts."]:
            await mw.client.add(
                [{"role": "user", "content": text}], user_id="alice", agent_id="a", infer=False
            )
        model = ScriptedChatModel("Sure.")
        agent = Agent(name="a", system_prompt="x", model=model, middlewares=[mw])
        await agent.reply(UserMsg("user", "Am I allergic to anything?"))
        assert "allergic to peanuts" in note_text(model.calls[0])


async def test_a_hit_below_the_threshold_is_left_out_whatever_its_words(
    pg_config: dict[str, Any],
) -> None:
    # The threshold is a cosine similarity on every store: a memory sharing the
    # question's words but far in meaning is not shown.
    mw = _middleware(pg_config, "alice")
    async with mw:
        for text in ("User lives in Hangzhou.", "User plays chess on Sundays."):
            await mw.client.add(
                [{"role": "user", "content": text}], user_id="alice", agent_id="a", infer=False
            )
        backend, scope = Mem0Backend(mw.client), Scope("alice")
        question = "Where does the user live?"
        assert await backend.search(question, scope, top_k=5, threshold=0.99) == []
        found = await backend.search(question, scope, top_k=5, threshold=0.0)
        assert [hit.memory for hit in found] == [
            "User lives in Hangzhou.",
            "User plays chess on Sundays.",
        ]


async def test_replicas_that_only_record_are_served_by_a_writer_process(
    pg_config: dict[str, Any],
) -> None:
    def factory(**parameters: Any) -> Any:
        return mem0_middleware_factory(
            chat_model=ScriptedChatModel("Noted."),
            embedding_model=HashEmbedding(DIMS),
            mem0_config=pg_config,
            mode="static_control",
            parameters=Mem0Middleware.Parameters(search_timeout=30, **parameters),
        )

    async def turn(replica: Any, text: str) -> ScriptedChatModel:
        model = ScriptedChatModel("Ok.")
        agent = Agent(
            name="helper",
            system_prompt="x",
            model=model,
            middlewares=await replica("alice", "helper", "s"),
        )
        await agent.reply(UserMsg(name="user", content=text))
        return model

    replica, writer = factory(deliver_writes=False), factory()
    with pytest.raises(ConfigurationError, match="deliver_writes=True"):
        await replica.serve_writes()
    await turn(replica, "I live in Hangzhou.")
    assert not await replica.flush(0.5)  # recorded, waiting for a writer
    assert _rows(pg_config) == []
    serving = asyncio.create_task(writer.serve_writes(poll=0.05))
    try:
        assert await replica.flush(30)
        assert await writer.flush(30)  # and judged
        assert {row["data"] for row in _rows(pg_config)} == {"User lives in Hangzhou."}
        assert writer.stats()["writes_stored"] == 1 and replica.stats()["writes_stored"] == 0
        model = await turn(replica, "Where do I live?")
        assert "User lives in Hangzhou." in note_text(model.calls[0])
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving
        assert await writer.aclose(10) and await replica.aclose(10)


async def test_an_embedded_store_cannot_leave_its_writes_to_another_process(
    tmp_path: Path,
) -> None:
    replica = mem0_middleware_factory(
        chat_model=ScriptedChatModel("Noted."),
        embedding_model=HashEmbedding(DIMS),
        folder=tmp_path,
        parameters=Mem0Middleware.Parameters(deliver_writes=False),
    )
    with pytest.raises(ConfigurationError, match="outbox every process reaches"):
        await replica("alice", "helper", "s")
    await replica.aclose()
