"""Consolidation on hosted mem0 (the fake platform of tests/fakes.py): the platform
answers a write with a pending event, so the memories it became are found by the
write's key; the words decide (no embedder here); reads, the note and forgetting
follow the marks."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from agentscope_mem0 import Mem0Middleware, Scope
from fakes import FakePlatform, hosted_client, note_text, one_session


@pytest.fixture
async def hosted(platform: FakePlatform) -> AsyncIterator[Any]:
    client = hosted_client(platform)
    yield client
    await client.async_client.aclose()


def _users(platform: FakePlatform) -> dict[str, Any]:
    """The user's memories on the platform by text (the agent's replies left out)."""
    return {r.memory: r for r in platform.records if r.user_id == "alice"}


async def test_a_repeat_is_found_by_its_write_and_marked_on_the_platform(
    platform: FakePlatform, hosted: Any
) -> None:
    mw = Mem0Middleware(user_id="alice", client=hosted, mode="static_control")
    assert mw.client_state.judge.model is None  # the platform keeps its own timeline
    for text in ("I like oolong tea.", "I enjoy oolong tea.", "My sister likes oolong tea."):
        await one_session(mw, text)
        assert await mw.flush(timeout=30)
    stored = _users(platform)
    kept, repeat = stored["I like oolong tea."], stored["I enjoy oolong tea."]
    assert repeat.metadata["duplicate_of"] == kept.id
    assert kept.metadata["duplicates"] == [repeat.id]
    # The marks were added to the metadata the write stored, not put in its place.
    assert repeat.metadata["said_at"] and repeat.metadata["agentscope_mem0_write"]
    assert not stored["My sister likes oolong tea."].metadata.get("duplicate_of")
    assert mw.stats()["consolidation_merged"] == 1

    model = await one_session(mw, "Which tea do I like?")
    note = note_text(model.calls[0])
    assert note.count("oolong tea") == 2, note  # the user's, once; the sister's
    assert "I enjoy oolong tea." not in note

    # Forgetting the kept memory forgets its repeat too; the sister's fact stays.
    done = await mw.client_state.backend.forget(kept.id)
    assert done.deleted and done.current_again == ()
    assert [hit.id for hit in done.repeats] == [repeat.id]
    assert set(_users(platform)) == {"My sister likes oolong tea."}
    found = await mw.client_state.backend.search("tea", Scope("alice"), top_k=5)
    assert [h.memory for h in found] == ["My sister likes oolong tea."]
    await mw.aclose()


async def test_a_write_the_platform_has_not_processed_is_left_alone_in_time(
    platform: FakePlatform, hosted: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    mw = Mem0Middleware(user_id="alice", client=hosted, mode="static_control")
    consolidator = mw.client_state.judge
    consolidator.hosted_waits = (0.05, 0.05)
    await one_session(mw, "I like oolong tea.")
    assert await mw.flush(timeout=30)
    # The platform is still processing: its listing does not have the write yet.
    real_route = platform._route

    def slow(method: str, path: str, body: Any, params: dict[str, str]) -> Any:
        if path == "/v3/memories/add/":
            answer = real_route(method, path, body, params)
            kept = platform.records[-2:]
            platform.records = platform.records[:-2]
            pending.extend(kept)
            return answer
        return real_route(method, path, body, params)

    pending: list[Any] = []
    monkeypatch.setattr(platform, "_route", slow)
    await one_session(mw, "I enjoy oolong tea.")
    assert await mw.flush(timeout=30)
    platform.records.extend(pending)
    assert not _users(platform)["I enjoy oolong tea."].metadata.get("duplicate_of")
    assert mw.stats()["consolidation_merged"] == 0
    await mw.aclose()
