"""OpenTelemetry spans for memory searches, writes, extraction and judgement.

Spans go through the OpenTelemetry API (a dependency of AgentScope), to the
tracer provider the application set up, for example with AgentScope's
``TracingMiddleware``. Without a provider the API hands out non-recording
spans and this costs next to nothing.

* ``agentscope_mem0.search``: one per mem0 search (the automatic one and each
  keyword of the ``search_memory`` tool); a child of the span current at the
  call, which is AgentScope's reply (or tool) span when its tracing is on.
* ``agentscope_mem0.write``: one per batch the writer sends; a child of the
  reply that started the scope's writer task (a task inherits its starter's
  context) and linked to the reply spans that queued its exchanges (see
  :func:`remember_origin`).
* ``agentscope_mem0.extract``: one per mem0 LLM call through the adapter
  (:func:`model_span`, with the prompt's message count and size in characters).
* ``agentscope_mem0.judge``: opened by the time judgement with :func:`span`;
  each of its model calls is a ``agentscope_mem0.judge_call`` (:func:`model_span`).

Model calls carry OpenTelemetry's GenAI attributes: ``gen_ai.operation.name``,
``gen_ai.request.model``, ``gen_ai.usage.input_tokens`` and
``gen_ai.usage.output_tokens`` (summed over its calls on the judge span).

Attributes hold ids, counts, states and latencies, never memory text or
message content, unless content is opted in with :func:`set_record_content`
or ``AGENTSCOPE_MEM0_TRACE_CONTENT=1``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from opentelemetry import trace
from opentelemetry.trace import Link, SpanContext, SpanKind, StatusCode

if TYPE_CHECKING:
    from .._scope import Scope
    from .usage import CallTokens

__all__ = [
    "CONTENT_ENV",
    "PREFIX",
    "SpanHandle",
    "model_span",
    "note_write",
    "record_content",
    "remember_origin",
    "set_record_content",
    "skipped_search",
    "span",
    "traced_search",
    "write_span",
]

T = TypeVar("T")

PREFIX = "agentscope_mem0"
"""Namespace of span names and attribute keys."""

CONTENT_ENV = "AGENTSCOPE_MEM0_TRACE_CONTENT"
"""Environment variable that opts in to query and response text on spans."""

_ORIGINS_KEPT = 10_000
_record_content: bool | None = None
_origins: OrderedDict[str, SpanContext] = OrderedDict()
_origins_lock = threading.Lock()
_write: contextvars.ContextVar[SpanHandle | None] = contextvars.ContextVar(
    "agentscope_mem0_write_span", default=None
)


@functools.cache
def _release() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("agentscope-mem0")
    except PackageNotFoundError:  # pragma: no cover - running from a source tree
        return "0"


_UNSET_PROVIDERS = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)


def _tracer() -> trace.Tracer:
    # Asked each time: a provider set up later (AgentScope's, the user's) takes effect.
    return trace.get_tracer(PREFIX, _release())


def set_record_content(enabled: bool | None) -> None:
    """Put query and response text on spans (``True``), keep it off (``False``),
    or follow ``AGENTSCOPE_MEM0_TRACE_CONTENT`` (``None``, the default)."""
    global _record_content
    _record_content = enabled


def record_content() -> bool:
    """Whether spans may carry text (see :func:`set_record_content`)."""
    if _record_content is not None:
        return _record_content
    return os.environ.get(CONTENT_ENV, "").strip().lower() in ("1", "true", "yes", "on")


def _clean(attrs: dict[str, Any]) -> dict[str, Any]:
    """Prefixed attribute keys; ``None`` values dropped (OpenTelemetry refuses them)."""
    out: dict[str, Any] = {}
    for key, value in attrs.items():
        if value is None:
            continue
        if not isinstance(value, str | bool | int | float):
            value = str(value)
        out[key if "." in key else f"{PREFIX}.{key}"] = value
    return out


class SpanHandle:
    """The span a ``with`` block opened, with helpers for this package's attributes."""

    def __init__(self, otel_span: trace.Span) -> None:
        self.span = otel_span
        self.counts: dict[str, int] = {}

    def set(self, **attrs: Any) -> None:
        """Set attributes (keys without a dot get the ``agentscope_mem0.`` prefix)."""
        if self.span.is_recording():
            self.span.set_attributes(_clean(attrs))

    def set_text(self, key: str, text: str) -> None:
        """Set a text attribute only when content recording is opted in."""
        if record_content():
            self.set(**{key: text})

    def count(self, **increments: int) -> None:
        """Add to counters that are set as attributes when the span ends."""
        for key, value in increments.items():
            self.counts[key] = self.counts.get(key, 0) + value

    def usage(self, tokens: CallTokens) -> None:
        """Add one model call's tokens to the span's ``gen_ai.usage.*`` attributes."""
        self.count(
            **{
                "gen_ai.usage.input_tokens": tokens.input_tokens,
                "gen_ai.usage.output_tokens": tokens.output_tokens,
            }
        )
        if tokens.estimated:
            self.set(usage_estimated=True)

    def fail(self, description: str) -> None:
        """Mark the span as failed without an exception."""
        self.span.set_status(StatusCode.ERROR, description)


@contextlib.contextmanager
def span(
    name: str,
    *,
    links: Sequence[Link] | None = None,
    kind: SpanKind = SpanKind.INTERNAL,
    **attrs: Any,
) -> Iterator[SpanHandle]:
    """Open the span ``agentscope_mem0.<name>`` as a child of the current one.

    Args:
        name: ``search``, ``write``, ``extract``, ``judge`` or another short name.
        links: Spans this one is linked to (not its parent).
        kind: The OpenTelemetry span kind.
        **attrs: Attributes; keys without a dot get the ``agentscope_mem0.``
            prefix, ``None`` values are left out.

    The span records its ``latency_ms``; an exception leaving the block marks
    it as an error (a cancellation as ``cancelled``) and is re-raised.
    """
    if isinstance(trace.get_tracer_provider(), _UNSET_PROVIDERS):
        # No tracing set up (yet): nothing would record it, and opening a
        # non-recording span costs ~35 us, several times a turn on the loop.
        yield SpanHandle(trace.INVALID_SPAN)
        return
    started = time.perf_counter()
    with _tracer().start_as_current_span(
        f"{PREFIX}.{name}",
        kind=kind,
        links=list(links or ()),
        attributes=_clean(attrs),
        record_exception=False,
        set_status_on_exception=False,
    ) as otel_span:
        handle = SpanHandle(otel_span)
        try:
            yield handle
        except asyncio.CancelledError:
            handle.set(cancelled=True)
            handle.fail("cancelled")
            raise
        except Exception as exc:
            handle.set(error=type(exc).__name__)
            otel_span.record_exception(exc)
            handle.fail(f"{type(exc).__name__}: {exc}")
            raise
        finally:
            handle.set(latency_ms=round((time.perf_counter() - started) * 1000, 3), **handle.counts)


# -- search -------------------------------------------------------------------


async def traced_search(
    call: Awaitable[list[T]],
    scope: Scope,
    *,
    query: str,
    top_k: int,
    source: str,
    breaker: object | None = None,
) -> list[T]:
    """Await a mem0 search inside an ``agentscope_mem0.search`` span.

    The caller's deadline (a ``TimeoutError`` from :func:`~agentscope_mem0._mem0.bounded.bounded`
    inside, or a cancellation from outside) is recorded as ``timed_out``.

    Args:
        call: The search, e.g. ``backend.search(query, scope, top_k=k)``.
        scope: Whose memories are searched.
        query: The query (on the span only with content recording).
        top_k: Memories asked for.
        source: ``auto`` (the reply's search) or ``tool`` (``search_memory``).
        breaker: The circuit breaker guarding the search (its ``state`` is recorded).
    """
    with _search_span(scope, top_k, source, breaker) as handle:
        handle.set_text("query", query)
        try:
            hits = await call
        except (asyncio.CancelledError, TimeoutError):
            handle.set(timed_out=True)
            raise
        handle.set(hits=len(hits), timed_out=False)
        return hits


def skipped_search(scope: Scope, *, top_k: int, breaker: object | None) -> None:
    """Record a search the open breaker skipped, as an empty ``search`` span."""
    with _search_span(scope, top_k, "auto", breaker, skipped=True, hits=0):
        pass


def _search_span(
    scope: Scope, top_k: int, source: str, breaker: object | None, **attrs: Any
) -> contextlib.AbstractContextManager[SpanHandle]:
    state = getattr(breaker, "state", None)
    return span(
        "search",
        user_id=scope.user_id,
        agent_id=scope.agent_id,
        top_k=top_k,
        source=source,
        breaker_state=None if state is None else str(getattr(state, "value", state)),
        **attrs,
    )


# -- writes -------------------------------------------------------------------


def remember_origin(key: str) -> None:
    """Remember the span current while write ``key`` is queued (the reply's).

    The write span of the batch that stores ``key`` links to it. Kept in this
    process only (a write replayed by another process has no link), for the
    last 10 000 writes.
    """
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return
    with _origins_lock:
        _origins[key] = context
        while len(_origins) > _ORIGINS_KEPT:
            _origins.popitem(last=False)


def _links_for(keys: Iterable[str]) -> list[Link]:
    with _origins_lock:
        found = [_origins.pop(key, None) for key in keys]
    unique = {(c.trace_id, c.span_id): c for c in found if c is not None}
    return [Link(context) for context in unique.values()]


@contextlib.contextmanager
def write_span(
    scope: Scope, keys: Sequence[str], *, attempts_before: int = 0
) -> Iterator[SpanHandle]:
    """The ``agentscope_mem0.write`` span of one batch sent to mem0.

    Args:
        scope: The batch's scope.
        keys: The idempotency keys of the batch's exchanges (for the links).
        attempts_before: Attempts made on these rows before (a replay).

    Inside, :func:`note_write` counts what happened to the batch: ``retries``,
    ``stored`` and ``failed`` exchanges.
    """
    with span(
        "write",
        links=_links_for(keys),
        user_id=scope.user_id,
        agent_id=scope.agent_id,
        batch_size=len(keys),
        attempts_before=attempts_before or None,
    ) as handle:
        handle.count(retries=0)
        token = _write.set(handle)
        try:
            yield handle
        finally:
            _write.reset(token)
            if handle.counts.get("failed"):
                handle.fail(f"{handle.counts['failed']} exchanges kept as failed")


def note_write(*, retries: int = 0, stored: int = 0, failed: int = 0) -> None:
    """Count a retry, or stored or failed exchanges, on the write span of this task."""
    handle = _write.get()
    if handle is not None:
        handle.count(
            **{k: v for k, v in (("retries", retries), ("stored", stored), ("failed", failed)) if v}
        )


# -- model calls ----------------------------------------------------------------


@contextlib.contextmanager
def model_span(name: str, model: Any, **attrs: Any) -> Iterator[SpanHandle]:
    """A ``CLIENT`` span around one chat-model call, with GenAI's request attributes."""
    model_name = str(getattr(model, "model", None) or type(model).__name__)
    gen_ai: dict[str, Any] = {"gen_ai.operation.name": "chat", "gen_ai.request.model": model_name}
    with span(name, kind=SpanKind.CLIENT, model=model_name, **gen_ai, **attrs) as handle:
        yield handle
