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
from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentscope_mem0 import (
    Mem0Backend,
    Mem0Middleware,
    PermanentBackendError,
    RetryPolicy,
    Scope,
    TransientBackendError,
    WriteQueue,
)
from fakes import (
    ENTITY_FIELDS,
    KEY,
    FakePlatform,
    Record,
    hosted_client,
    matches,
    note_text,
    one_session,
)

# -- fixtures ---------------------------------------------------------------


@pytest.fixture
async def hosted(platform: FakePlatform) -> AsyncIterator[Any]:
    client = hosted_client(platform)
    yield client
    await client.async_client.aclose()


# -- the key --------------------------------------------------------------


def test_invalid_key_fails_at_construction(platform: FakePlatform) -> None:
    with pytest.raises(ValueError, match="Invalid API key"):
        hosted_client(platform, key="m0-wrong")
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
    # The last turn's write is deleted with the rest before its consolidation finds
    # it on the platform, which would otherwise look for a minute before closing.
    mw.client_state.judge.hosted_waits = (0.05, 0.1)
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
