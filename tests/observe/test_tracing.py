"""Spans from real replies: AgentScope's TracingMiddleware, real mem0 on local Qdrant.

The OpenTelemetry SDK's in-memory exporter collects what a real
``Agent.reply`` with ``TracingMiddleware`` and ``Mem0Middleware`` emits.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import ToolCallBlock, UserMsg
from agentscope.middleware import TracingMiddleware
from agentscope.tool import Toolkit
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentscope_mem0 import Mem0Middleware
from agentscope_mem0._observe import tracing as _tracing
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import RecordingClient, real_memory

_EXPORTER = InMemorySpanExporter()


def _provider() -> None:
    """Install one SDK provider for the process (OpenTelemetry allows one)."""
    current = trace.get_tracer_provider()
    if not isinstance(current, TracerProvider):
        current = TracerProvider()
        trace.set_tracer_provider(current)
    if not getattr(current, "_agentscope_mem0_test", False):
        current.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        current._agentscope_mem0_test = True  # type: ignore[attr-defined]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    _provider()
    _EXPORTER.clear()
    _tracing.set_record_content(None)
    yield _EXPORTER
    _EXPORTER.clear()
    _tracing.set_record_content(None)


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


def reply_spans(exporter: InMemorySpanExporter) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent")]


def _middleware(store_config: dict[str, Any], model: ScriptedChatModel, **kw: Any) -> Any:
    return Mem0Middleware(
        user_id="alice",
        chat_model=model,
        embedding_model=HashEmbedding(),
        mem0_config=store_config,
        **kw,
    )


async def test_search_nests_under_the_reply_and_write_links_to_it(
    spans: InMemorySpanExporter, store_config: dict[str, Any]
) -> None:
    model = ScriptedChatModel("Noted: dark mode.")
    mw = _middleware(store_config, model)
    bot = Agent(
        name="helper", system_prompt="You help.", model=model, middlewares=[TracingMiddleware(), mw]
    )
    await bot.reply(UserMsg("user", "I like dark mode in every editor I use."))
    assert await mw.flush(timeout=30)

    (reply,) = reply_spans(spans)
    (search,) = named(spans, "agentscope_mem0.search")
    assert search.parent is not None and search.parent.span_id == reply.context.span_id
    assert search.context.trace_id == reply.context.trace_id
    attrs = dict(search.attributes or {})
    assert attrs["agentscope_mem0.user_id"] == "alice"
    assert attrs["agentscope_mem0.agent_id"] == "helper"
    assert attrs["agentscope_mem0.top_k"] == 5
    assert attrs["agentscope_mem0.hits"] == 0  # nothing stored yet
    assert attrs["agentscope_mem0.timed_out"] is False
    assert attrs["agentscope_mem0.source"] == "auto"
    assert attrs["agentscope_mem0.breaker_state"] == "closed"
    assert attrs["agentscope_mem0.latency_ms"] > 0
    assert "agentscope_mem0.query" not in attrs

    (write,) = named(spans, "agentscope_mem0.write")
    assert [link.context.span_id for link in write.links] == [reply.context.span_id]
    wattrs = dict(write.attributes or {})
    assert wattrs["agentscope_mem0.batch_size"] == 1
    assert wattrs["agentscope_mem0.stored"] == 1
    assert wattrs["agentscope_mem0.retries"] == 0
    assert wattrs["agentscope_mem0.user_id"] == "alice"

    (extract,) = named(spans, "agentscope_mem0.extract")
    assert extract.parent is not None and extract.parent.span_id == write.context.span_id
    eattrs = dict(extract.attributes or {})
    assert eattrs["agentscope_mem0.prompt_chars"] > 0
    assert eattrs["agentscope_mem0.response_chars"] > 0
    assert "agentscope_mem0.response" not in eattrs
    assert eattrs["agentscope_mem0.memories_kept"] == 1  # the user's, checked
    assert eattrs["agentscope_mem0.memories_dropped"] == 0

    # Nothing of the conversation is on any of this package's spans.
    for item in spans.get_finished_spans():
        if item.name.startswith("agentscope_mem0."):
            for value in (item.attributes or {}).values():
                assert "dark mode" not in str(value)

    # The second reply's search finds the stored memory.
    _EXPORTER.clear()
    await bot.reply(UserMsg("user", "Which mode do I like in editors?"))
    (search,) = named(spans, "agentscope_mem0.search")
    assert dict(search.attributes or {})["agentscope_mem0.hits"] >= 1
    await mw.aclose()


async def test_content_is_recorded_only_when_opted_in(
    spans: InMemorySpanExporter, store_config: dict[str, Any]
) -> None:
    _tracing.set_record_content(True)
    model = ScriptedChatModel("Noted.")
    mw = _middleware(store_config, model)
    bot = Agent(name="helper", system_prompt="You help.", model=model, middlewares=[mw])
    await bot.reply(UserMsg("user", "My cat is called Miso."))
    assert await mw.flush(timeout=30)
    (search,) = named(spans, "agentscope_mem0.search")
    assert "Miso" in str(dict(search.attributes or {})["agentscope_mem0.query"])
    (extract,) = named(spans, "agentscope_mem0.extract")
    assert "agentscope_mem0.response" in dict(extract.attributes or {})
    await mw.aclose()


async def test_timed_out_search_and_open_breaker(
    spans: InMemorySpanExporter, store_config: dict[str, Any]
) -> None:
    model = ScriptedChatModel("Go on.")
    slow = RecordingClient(real_memory(store_config, model), search_delay=1.0)
    mw = Mem0Middleware(
        user_id="alice",
        client=slow,
        parameters=Mem0Middleware.Parameters(
            search_timeout=0.05, breaker_threshold=1, breaker_cooldown=60
        ),
    )
    bot = Agent(name="helper", system_prompt="You help.", model=model, middlewares=[mw])
    await bot.reply(UserMsg("user", "What did I say about tea?"))
    await bot.reply(UserMsg("user", "And about coffee?"))
    first, second = sorted(named(spans, "agentscope_mem0.search"), key=lambda s: s.start_time or 0)
    a = dict(first.attributes or {})
    assert a["agentscope_mem0.timed_out"] is True
    assert first.status.status_code is trace.StatusCode.ERROR
    b = dict(second.attributes or {})
    assert b["agentscope_mem0.skipped"] is True
    assert b["agentscope_mem0.breaker_state"] == "open"
    await mw.aclose()


async def test_tool_search_spans_nest_under_the_tool_span(
    spans: InMemorySpanExporter, store_config: dict[str, Any]
) -> None:
    call = ToolCallBlock(
        id="c1", name="search_memory", input=json.dumps({"keywords": ["tea", "coffee"]})
    )
    model = ScriptedChatModel([[call], "Done."])  # type: ignore[list-item]
    mw = _middleware(store_config, model, mode="agent_control")
    bot = Agent(
        name="helper",
        system_prompt="",
        model=model,
        middlewares=[TracingMiddleware(), mw],
        toolkit=Toolkit(tools=await mw.list_tools()),
    )
    await bot.reply(UserMsg("user", "What do I drink?"))
    searches = named(spans, "agentscope_mem0.search")
    assert len(searches) == 2  # one per keyword
    (tool,) = [s for s in spans.get_finished_spans() if s.name.startswith("execute_tool")]
    (reply,) = reply_spans(spans)
    assert tool.parent is not None and tool.parent.span_id == reply.context.span_id
    for search in searches:
        assert search.parent is not None and search.parent.span_id == tool.context.span_id
        attrs = dict(search.attributes or {})
        assert attrs["agentscope_mem0.source"] == "tool"
        assert attrs["agentscope_mem0.breaker_state"] == "closed"
    await mw.aclose()


def test_write_span_counts_retries_and_failures(spans: InMemorySpanExporter) -> None:
    from agentscope_mem0 import Scope

    async def run() -> None:
        with _tracing.write_span(Scope("bob", None), ["k1", "k2"]):
            _tracing.note_write(retries=1)
            _tracing.note_write(retries=1)
            _tracing.note_write(failed=2)

    asyncio.run(run())
    (write,) = named(spans, "agentscope_mem0.write")
    attrs = dict(write.attributes or {})
    assert attrs["agentscope_mem0.retries"] == 2
    assert attrs["agentscope_mem0.failed"] == 2
    assert write.status.status_code is trace.StatusCode.ERROR
    assert write.links == ()


def test_judge_helper_span(spans: InMemorySpanExporter) -> None:
    with _tracing.span("judge", user_id="bob", candidates=3) as handle:
        handle.set(decision="supersedes", extra=None)
    (judge,) = named(spans, "agentscope_mem0.judge")
    attrs = dict(judge.attributes or {})
    assert attrs["agentscope_mem0.candidates"] == 3
    assert attrs["agentscope_mem0.decision"] == "supersedes"
    assert "agentscope_mem0.extra" not in attrs


async def test_the_time_judgement_is_a_judge_span_under_the_write(
    spans: InMemorySpanExporter, tmp_path: Any
) -> None:
    mw = Mem0Middleware.local(
        user_id="alice",
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(),
        folder=tmp_path / "data",
    )
    async with mw:
        for text, when in (
            ("I live in Hangzhou.", "2024-01-05T10:00:00+00:00"),
            ("I moved to Beijing last month.", "2024-03-10T10:00:00+00:00"),
        ):
            model = ScriptedChatModel("Noted.")
            bot = Agent(name="helper", system_prompt="You help.", model=model, middlewares=[mw])
            await bot.reply(UserMsg(name="user", content=text, created_at=when))
            assert await mw.flush(timeout=30)
    writes = {s.context.span_id: s for s in named(spans, "agentscope_mem0.write")}
    judges = named(spans, "agentscope_mem0.judge")
    assert len(judges) == 2 and len(writes) == 2
    for judge in judges:
        assert judge.parent is not None and judge.parent.span_id in writes
    last = dict(max(judges, key=lambda s: s.start_time or 0).attributes or {})
    assert last["agentscope_mem0.user_id"] == "alice"
    assert last["agentscope_mem0.new"] == 1
    assert last["agentscope_mem0.candidates"] == 1
    assert last["agentscope_mem0.changed"] >= 2  # the new memory and the one it supersedes
    assert "Hangzhou" not in str(last) and "Beijing" not in str(last)
    # Its model calls are GenAI client spans; the judge span sums their tokens.
    last_id = max(judges, key=lambda s: s.start_time or 0).context.span_id
    calls = [c for c in named(spans, "agentscope_mem0.judge_call") if c.parent.span_id == last_id]
    assert len(calls) >= 2
    for call in calls:
        attrs = dict(call.attributes or {})
        assert attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.request.model"] == "scripted"
        assert attrs["gen_ai.usage.input_tokens"] > 0
    assert last["gen_ai.usage.input_tokens"] == sum(
        dict(c.attributes or {})["gen_ai.usage.input_tokens"] for c in calls
    )
    for extract in named(spans, "agentscope_mem0.extract"):
        assert dict(extract.attributes or {})["gen_ai.usage.input_tokens"] > 0


async def test_a_write_is_a_child_of_the_reply_that_started_its_worker(
    spans: InMemorySpanExporter, store_config: dict[str, Any]
) -> None:
    """What docs/tracing.md says: the writer's task inherits the reply's context,
    so its write span sits in the reply's trace (and links to the reply too)."""
    model = ScriptedChatModel("Noted.")
    mw = _middleware(store_config, model)
    bot = Agent(
        name="helper", system_prompt="You help.", model=model, middlewares=[TracingMiddleware(), mw]
    )
    await bot.reply(UserMsg("user", "I like dark mode in every editor I use."))
    assert await mw.flush(timeout=30)
    (reply,) = reply_spans(spans)
    (write,) = named(spans, "agentscope_mem0.write")
    assert write.parent is not None and write.parent.span_id == reply.context.span_id
    assert write.context.trace_id == reply.context.trace_id
    assert write.end_time is not None and reply.end_time is not None
    assert write.end_time > reply.end_time  # it runs after the reply returned
    await mw.aclose()


def test_without_tracing_set_up_no_span_is_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    # A non-recording span costs ~35 us on the event loop, several times a turn.
    def no_tracer() -> Any:
        raise AssertionError("a span was opened")

    monkeypatch.setattr(trace, "get_tracer_provider", trace.ProxyTracerProvider)
    monkeypatch.setattr(_tracing, "_tracer", no_tracer)
    with _tracing.span("write", user_id="alice") as handle:
        handle.set(batch=2)
        handle.count(memories=1)
        handle.fail("kept apart")
    with pytest.raises(KeyError), _tracing.span("search"):
        raise KeyError("the block's own error still leaves it")
