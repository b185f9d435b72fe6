"""Contract tests of the middleware with hosted mem0 (``mem0.AsyncMemoryClient``).

The platform is faked in-process (:class:`FakePlatform` behind an
``httpx.MockTransport``); mem0's real client, the middleware, the backend and
the write queue run unchanged. No network, no API key.

The fake follows the platform's documentation (docs.mem0.ai, mem0 repository
``docs/platform/features/entity-scoped-memory.mdx``,
``docs/api-reference/memory/search-memories.mdx``), not guesses:

* entity ids go inside ``filters`` (top-level ones are rejected with 400) and
  at least one is required;
* an add carrying ``user_id`` and ``agent_id`` stores each message under the
  id of its role: user messages in the user's space (``agent_id`` null),
  assistant messages in the agent's space (``user_id`` null);
* *implicit null scoping*: a filter that does not mention an entity field only
  matches records where that field is null, so ``{"user_id": u, "agent_id": a}``
  finds nothing ("combining both returns an empty list today");
* search ``top_k`` is 1..1000 and ``threshold`` defaults to 0.1;
* adds are queued: the answer is a ``PENDING`` event, not the memories.
"""

from __future__ import annotations

import json
import math
import re
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import requests

from agentscope_mem0 import (
    Mem0Middleware,
    PermanentBackendError,
    TransientBackendError,
)
from agentscope_mem0._backend import Mem0Backend
from agentscope_mem0._scope import Scope
from agentscope_mem0._writer import RetryPolicy, WriteQueue
from fakes import note_text, one_session

HOST = "https://api.mem0.test"
KEY = "m0-test-key"

ENTITY_FIELDS = ("user_id", "agent_id", "app_id", "run_id")
FILTER_FIELDS = {*ENTITY_FIELDS, "metadata", "memory_ids", "created_at", "updated_at"}
LOGIC = ("AND", "OR", "NOT")


class BadRequest(Exception):
    """A request the platform answers with 400."""


@dataclass
class Record:
    """One stored memory."""

    id: str
    memory: str
    metadata: dict[str, Any]
    user_id: str | None = None
    agent_id: str | None = None
    app_id: str | None = None
    run_id: str | None = None
    created_at: str = "2026-01-01T00:00:00+00:00"

    def as_json(self, score: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "memory": self.memory,
            "metadata": self.metadata,
            "created_at": self.created_at,
            "updated_at": None,
            "categories": [],
            **{name: getattr(self, name) for name in ENTITY_FIELDS},
        }
        if score is not None:
            out["score"] = score
        return out


@dataclass
class Sent:
    """One request the platform received."""

    method: str
    path: str
    body: Any
    params: dict[str, str]
    headers: httpx.Headers


@dataclass
class FakePlatform:
    """The mem0 platform's HTTP API, in memory, as documented (see module docstring)."""

    keys: set[str] = field(default_factory=lambda: {KEY})
    records: list[Record] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    _failures: list[tuple[str, Callable[[httpx.Request], httpx.Response]]] = field(
        default_factory=list
    )

    # -- scripting ----------------------------------------------------------

    def fail(self, path: str, status: int, *, times: int = 1, detail: str = "") -> None:
        """Answer the next ``times`` requests to ``path`` with ``status``."""

        def answer(request: httpx.Request) -> httpx.Response:
            body = {"detail": detail or f"injected {status}"}
            headers = {"Retry-After": "1"} if status == 429 else {}
            return httpx.Response(status, json=body, headers=headers)

        self._failures += [(path, answer)] * times

    def disconnect(self, path: str, *, times: int = 1) -> None:
        """Drop the connection for the next ``times`` requests to ``path``."""

        def answer(request: httpx.Request) -> httpx.Response:
            raise httpx.ConnectError("connection refused", request=request)

        self._failures += [(path, answer)] * times

    def named(self, path: str) -> list[Sent]:
        return [s for s in self.sent if s.path == path]

    # -- transport ----------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        path = request.url.path
        self.sent.append(
            Sent(request.method, path, body, dict(request.url.params), request.headers)
        )
        for i, (prefix, answer) in enumerate(self._failures):
            if path == prefix:
                del self._failures[i]
                return answer(request)
        if request.headers.get("Authorization") not in {f"Token {k}" for k in self.keys}:
            return httpx.Response(401, json={"detail": "Invalid API key"})
        try:
            return self._route(request.method, path, body, dict(request.url.params))
        except BadRequest as exc:
            return httpx.Response(400, json={"detail": str(exc)})

    def _route(self, method: str, path: str, body: Any, params: dict[str, str]) -> httpx.Response:
        if (method, path) == ("GET", "/v1/ping/"):
            return httpx.Response(
                200, json={"org_id": "org", "project_id": "proj", "user_email": "dev@x.test"}
            )
        if (method, path) == ("POST", "/v3/memories/add/"):
            return httpx.Response(200, json=self._add(body))
        if (method, path) == ("POST", "/v3/memories/search/"):
            return httpx.Response(200, json=self._search(body))
        if (method, path) == ("POST", "/v3/memories/"):
            found = [r.as_json() for r in self.records if matches(r, _filters(body))]
            return httpx.Response(
                200, json={"count": len(found), "next": None, "previous": None, "results": found}
            )
        if method == "DELETE" and path == "/v1/memories/":
            scope = {k: v for k, v in params.items() if k in ENTITY_FIELDS}
            if not scope:
                raise BadRequest("at least one entity id is required")
            self.records = [r for r in self.records if not _has(r, scope)]
            return httpx.Response(200, json={"message": "Memories deleted successfully!"})
        match = re.fullmatch(r"/v1/memories/([^/]+)/", path)
        if method == "DELETE" and match:
            before = len(self.records)
            self.records = [r for r in self.records if r.id != match.group(1)]
            if len(self.records) == before:
                return httpx.Response(404, json={"detail": "Memory not found"})
            return httpx.Response(200, json={"message": "Memory deleted successfully!"})
        return httpx.Response(404, json={"detail": f"no route {method} {path}"})

    def _add(self, body: dict[str, Any]) -> dict[str, Any]:
        ids = {k: body.get(k) for k in ENTITY_FIELDS if body.get(k)}
        if not ids:
            raise BadRequest("at least one of user_id, agent_id, app_id, run_id is required")
        for message in body.get("messages") or []:
            role, text = message.get("role"), str(message.get("content") or "")
            # Each message lands in the entity space of its role.
            if role == "user" and ids.get("user_id"):
                owner = {"user_id": ids["user_id"]}
            elif role == "assistant" and ids.get("agent_id"):
                owner = {"agent_id": ids["agent_id"]}
            else:
                continue
            self.records.append(
                Record(
                    id=str(uuid.uuid4()),
                    memory=text,
                    metadata=dict(body.get("metadata") or {}),
                    app_id=ids.get("app_id"),
                    run_id=ids.get("run_id"),
                    **owner,
                )
            )
        event = {
            "message": "Memory processing has been queued for background execution",
            "status": "PENDING",
            "event_id": str(uuid.uuid4()),
        }
        return {"results": [event]}

    def _search(self, body: dict[str, Any]) -> dict[str, Any]:
        if any(k in body for k in ENTITY_FIELDS):
            raise BadRequest("entity ids must be passed inside `filters`")
        query = str(body.get("query") or "")
        top_k = body.get("top_k", 10)
        if not isinstance(top_k, int) or not 1 <= top_k <= 1000:
            raise BadRequest("top_k must be within 1..1000")
        threshold = body.get("threshold", 0.1)
        filters = _filters(body)
        scored = [
            (score, r)
            for r in self.records
            if matches(r, filters) and (score := _similarity(query, r.memory)) >= threshold
        ]
        scored.sort(key=lambda pair: -pair[0])
        return {"results": [r.as_json(round(s, 4)) for s, r in scored[:top_k]]}


def _filters(body: Any) -> dict[str, Any]:
    filters = body.get("filters") if isinstance(body, dict) else None
    if not isinstance(filters, dict) or not filters:
        raise BadRequest("`filters` is required")
    if not mentioned(filters) & set(ENTITY_FIELDS):
        raise BadRequest("filters need at least one of user_id, agent_id, app_id, run_id")
    return filters


def mentioned(filters: Any) -> set[str]:
    """Every field a filter names, at any depth."""
    if isinstance(filters, list):
        return set().union(*(mentioned(f) for f in filters)) if filters else set()
    if not isinstance(filters, dict):
        return set()
    out: set[str] = set()
    for key, value in filters.items():
        if key in LOGIC:
            out |= mentioned(value)
        elif key in FILTER_FIELDS:
            out.add(key)
        else:
            raise BadRequest(f"unsupported filter field {key!r}")
    return out


def matches(record: Record, filters: dict[str, Any]) -> bool:
    """Whether ``record`` passes ``filters``, with implicit null scoping."""
    named = mentioned(filters)
    unnamed_null = all(getattr(record, f) is None for f in ENTITY_FIELDS if f not in named)
    return unnamed_null and _eval(record, filters)


def _eval(record: Record, filters: dict[str, Any]) -> bool:
    results = []
    for key, value in filters.items():
        if key == "AND":
            results.append(all(_eval(record, f) for f in value))
        elif key == "OR":
            results.append(any(_eval(record, f) for f in value))
        elif key == "NOT":
            results.append(not any(_eval(record, f) for f in value))
        elif key == "metadata":
            results.append(all(record.metadata.get(k) == v for k, v in value.items()))
        elif key == "memory_ids":
            results.append(record.id in value)
        elif key in ENTITY_FIELDS:
            results.append(_entity(getattr(record, key), value))
        else:
            raise BadRequest(f"the fake does not filter on {key!r}")
    return all(results)


def _entity(actual: str | None, wanted: Any) -> bool:
    if wanted == "*":
        return actual is not None
    if isinstance(wanted, dict):
        if "in" in wanted:
            return actual in wanted["in"]
        if "ne" in wanted:
            return actual != wanted["ne"]
        raise BadRequest(f"unsupported operator in {wanted!r}")
    return actual == wanted


def _has(record: Record, scope: dict[str, str]) -> bool:
    return all(getattr(record, k) == v for k, v in scope.items())


def _similarity(query: str, text: str) -> float:
    q, t = (set(re.findall(r"[a-z0-9]+", s.lower())) for s in (query, text))
    return len(q & t) / math.sqrt(len(q) * len(t)) if q and t else 0.0


# -- fixtures ---------------------------------------------------------------


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


def _client(platform: FakePlatform, key: str = KEY) -> Any:
    from mem0 import AsyncMemoryClient

    http = httpx.AsyncClient(transport=httpx.MockTransport(platform.handle))
    return AsyncMemoryClient(api_key=key, host=HOST, client=http)


@pytest.fixture
async def hosted(platform: FakePlatform) -> AsyncIterator[Any]:
    client = _client(platform)
    yield client
    await client.async_client.aclose()


# -- the key --------------------------------------------------------------


def test_invalid_key_fails_at_construction(platform: FakePlatform) -> None:
    with pytest.raises(ValueError, match="Invalid API key"):
        _client(platform, key="m0-wrong")
    assert platform.named("/v1/ping/")[0].headers["Authorization"] == "Token m0-wrong"


async def test_key_revoked_later_is_a_permanent_error_naming_the_key(
    platform: FakePlatform, hosted: Any
) -> None:
    platform.keys.clear()
    backend = Mem0Backend(hosted)
    with pytest.raises(PermanentBackendError, match="Invalid API key"):
        await backend.search("anything", Scope("alice"), top_k=3)


# -- request shapes ---------------------------------------------------------


async def test_search_sends_scope_in_filters_and_the_top_k(
    platform: FakePlatform, hosted: Any
) -> None:
    mw = Mem0Middleware(user_id="alice", client=hosted, mode="static_control", top_k=3)
    await one_session(mw, "What do I like to drink?")
    (search,) = platform.named("/v3/memories/search/")
    assert search.body["query"] == "What do I like to drink?"
    assert search.body["top_k"] == 3
    assert search.headers["Authorization"] == f"Token {KEY}"
    # The platform rejects entity ids outside `filters`; the scope is inside.
    assert not set(search.body) & set(ENTITY_FIELDS)
    assert "alice" in json.dumps(search.body["filters"])
    await mw.aclose()


async def test_add_carries_user_and_agent(platform: FakePlatform, hosted: Any) -> None:
    mw = Mem0Middleware(user_id="alice", client=hosted, mode="static_control")
    await one_session(mw, "I like oolong tea.", agent="barista")
    assert await mw.flush(timeout=10)
    (add,) = platform.named("/v3/memories/add/")
    assert add.body["user_id"] == "alice"
    assert add.body["agent_id"] == "barista"
    assert [m["role"] for m in add.body["messages"]] == ["user", "assistant"]
    assert add.body["messages"][0]["content"] == "I like oolong tea."
    await mw.aclose()


async def test_the_user_space_filter_selects_alice_only(
    platform: FakePlatform, hosted: Any
) -> None:
    """Whatever filter shape the backend sends, on the platform's rules it must
    select Alice's memories and nobody else's."""
    mw = Mem0Middleware(user_id="alice", client=hosted, mode="static_control")
    await one_session(mw, "hello")
    filters = platform.named("/v3/memories/search/")[-1].body["filters"]
    alice = Record(id="1", memory="m", metadata={}, user_id="alice")
    bob = Record(id="2", memory="m", metadata={}, user_id="bob")
    assert not matches(bob, filters)
    assert matches(alice, filters) or matches(
        Record(id="3", memory="m", metadata={}, user_id="alice", agent_id="helper"), filters
    )
    await mw.aclose()


# -- memory across sessions on the platform's scoping rules ------------------


async def test_user_wide_search_finds_the_facts_of_an_earlier_session(
    platform: FakePlatform, hosted: Any
) -> None:
    mw = Mem0Middleware(
        user_id="alice", client=hosted, mode="static_control", scope_search_by_agent=False
    )
    await one_session(mw, "I like oolong tea.")
    assert await mw.flush(timeout=10)
    later = Mem0Middleware(
        user_id="alice", client=hosted, mode="static_control", scope_search_by_agent=False
    )
    model = await one_session(later, "Which tea do I like?")
    assert "I like oolong tea." in note_text(model.calls[0])
    bob = Mem0Middleware(
        user_id="bob", client=hosted, mode="static_control", scope_search_by_agent=False
    )
    model = await one_session(bob, "Which tea do I like?")
    assert "oolong" not in note_text(model.calls[0])
    for m in (mw, later, bob):
        await m.aclose()


async def test_default_agent_scoped_search_finds_the_facts_of_an_earlier_session(
    platform: FakePlatform, hosted: Any
) -> None:
    mw = Mem0Middleware(user_id="alice", client=hosted, mode="static_control")
    await one_session(mw, "I like oolong tea.")
    assert await mw.flush(timeout=10)
    later = Mem0Middleware(user_id="alice", client=hosted, mode="static_control")
    model = await one_session(later, "Which tea do I like?")
    try:
        assert "I like oolong tea." in note_text(model.calls[0])
    finally:
        await mw.aclose()
        await later.aclose()


async def test_delete_and_delete_all_on_the_platform(platform: FakePlatform, hosted: Any) -> None:
    mw = Mem0Middleware(
        user_id="alice",
        client=hosted,
        mode="static_control",
        scope_search_by_agent=False,
        await_write=True,
    )
    await one_session(mw, "I like oolong tea.")
    await one_session(mw, "I live in Hangzhou.")
    memories = (await hosted.get_all(filters={"user_id": "alice"}))["results"]
    assert {m["memory"] for m in memories} == {"I like oolong tea.", "I live in Hangzhou."}
    await hosted.delete(next(m["id"] for m in memories if "tea" in m["memory"]))
    model = await one_session(mw, "Which tea do I like, in Hangzhou?")
    note = note_text(model.calls[0])
    assert "oolong" not in note and "Hangzhou" in note
    await hosted.delete_all(user_id="alice")
    assert (await hosted.get_all(filters={"user_id": "alice"}))["results"] == []
    await mw.aclose()


# -- errors and the write queue's retry policy ------------------------------


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (500, TransientBackendError),
        (502, TransientBackendError),
        (503, TransientBackendError),
        (504, TransientBackendError),
        (429, TransientBackendError),
        (408, TransientBackendError),
        (400, PermanentBackendError),
        (401, PermanentBackendError),
        (403, PermanentBackendError),
        (404, PermanentBackendError),
        (413, PermanentBackendError),
        (422, PermanentBackendError),
    ],
)
@pytest.mark.parametrize("call", ["search", "add"])
async def test_http_errors_map_to_transient_or_permanent(
    platform: FakePlatform, hosted: Any, status: int, expected: type, call: str
) -> None:
    backend = Mem0Backend(hosted)
    path = f"/v3/memories/{call}/"
    platform.fail(path, status)
    with pytest.raises(expected) as info:
        if call == "search":
            await backend.search("tea", Scope("alice", "helper"), top_k=3)
        else:
            await backend.add([{"role": "user", "content": "I like tea."}], Scope("alice"))
    assert str(status) in repr(info.value.__cause__) or info.value.__cause__ is not None


async def test_connection_failure_is_transient(platform: FakePlatform, hosted: Any) -> None:
    platform.disconnect("/v3/memories/search/")
    with pytest.raises(TransientBackendError):
        await Mem0Backend(hosted).search("tea", Scope("alice"), top_k=3)


def _queue(hosted: Any) -> WriteQueue:
    fast = RetryPolicy(max_attempts=4, initial_delay=0.01, max_delay=0.05)
    return WriteQueue(Mem0Backend(hosted), retry=fast)


@pytest.mark.parametrize("status", [503, 429])
async def test_queue_retries_a_transient_failure_and_stores_once(
    platform: FakePlatform, hosted: Any, status: int
) -> None:
    queue = _queue(hosted)
    platform.fail("/v3/memories/add/", status)
    await queue.submit(Scope("alice", "helper"), [{"role": "user", "content": "I like tea."}])
    assert await queue.flush(timeout=10)
    stats = queue.stats()
    assert stats["writes_retried"] == 1 and stats["writes_stored"] == 1
    assert stats["writes_failed"] == 0
    assert [r.memory for r in platform.records] == ["I like tea."]
    await queue.aclose()


@pytest.mark.parametrize("status", [400, 401, 422])
async def test_queue_does_not_retry_a_permanent_failure(
    platform: FakePlatform, hosted: Any, status: int
) -> None:
    queue = _queue(hosted)
    platform.fail("/v3/memories/add/", status, times=10)
    await queue.submit(Scope("alice", "helper"), [{"role": "user", "content": "I like tea."}])
    assert await queue.flush(timeout=10)
    try:
        assert len(platform.named("/v3/memories/add/")) == 1
        assert queue.stats()["writes_failed"] == 1
        (failed,) = await queue.failed()
        assert str(status) in failed.error or "Invalid" in failed.error
    finally:
        await queue.aclose()
