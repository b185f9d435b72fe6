"""Forget means forget: a memory's repeats go with it, and what it replaced comes
back only when nothing newer says otherwise. Real mem0 on the embedded store;
timelines written by the judgement, or marked by hand where a case needs one
the judgement would not make."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from agentscope.agent import Agent
from agentscope.message import UserMsg

from agentscope_mem0 import Mem0Middleware, Scope
from agentscope_mem0._mem0.backend import Mem0Backend
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

READS = Scope("alice", "helper", with_user_level=True)


def _middleware(tmp_path: Path) -> Mem0Middleware:
    return Mem0Middleware.local(
        user_id="alice",
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(),
        folder=tmp_path / "data",
        mode="static_control",
    )


async def _turn(mw: Mem0Middleware, text: str, when: str) -> None:
    bot = Agent(name="helper", system_prompt="x", model=ScriptedChatModel("Ok."), middlewares=[mw])
    await bot.reply(UserMsg(name="user", content=text, created_at=when))
    assert await mw.flush(timeout=60)


async def _raw(backend: Mem0Backend, text: str, when: str) -> str:
    """A memory stored verbatim and not judged."""
    said = datetime.fromisoformat(when)
    message = [{"role": "user", "content": text}]
    (result,) = await backend.add(message, Scope("alice", "helper"), infer=False, said_at=said)
    return str(result["id"])


async def _current(backend: Mem0Backend) -> list[str]:
    return sorted(h.memory for h in await backend.get_all(READS, limit=50))


async def _by_text(mw: Mem0Middleware) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = {}
    for item in (await mw.client.get_all(filters={"user_id": "alice"}))["results"]:
        found.setdefault(item["memory"], []).append(item)
    return found


async def test_forgetting_a_change_forgets_its_repeats_and_brings_back_what_it_replaced(
    tmp_path: Path,
) -> None:
    mw = _middleware(tmp_path)
    async with mw:
        await _turn(mw, "I live in Hangzhou.", "2024-01-05T10:00:00+00:00")
        await _turn(mw, "I moved to Beijing.", "2024-03-10T10:00:00+00:00")
        await _turn(mw, "I moved to Beijing!", "2024-03-11T10:00:00+00:00")
        stored = await _by_text(mw)
        (beijing,) = stored["User moved to Beijing."]
        (repeat,) = stored["User moved to Beijing!"]
        assert repeat["metadata"]["duplicate_of"] == beijing["id"]
        backend = mw.client_state.backend
        assert await _current(backend) == ["User moved to Beijing."]

        done = await backend.forget(beijing["id"])
        # One current place, and the forgotten fact is recalled in no wording.
        assert await _current(backend) == ["User lives in Hangzhou."]
        assert set(await _by_text(mw)) == {"User lives in Hangzhou."}
        assert done.deleted
        assert [hit.id for hit in done.repeats] == [repeat["id"]]
        assert [hit.memory for hit in done.repeats] == ["User moved to Beijing!"]
        (hangzhou,) = stored["User lives in Hangzhou."]
        assert done.current_again == (hangzhou["id"],)


async def test_what_a_replaced_memory_replaced_stays_replaced_by_the_newer_one(
    tmp_path: Path,
) -> None:
    """Hangzhou, then Beijing, then Shanghai: forgetting Beijing leaves Hangzhou
    replaced, now by Shanghai."""
    mw = _middleware(tmp_path)
    async with mw:
        await _turn(mw, "I live in Hangzhou.", "2024-01-05T10:00:00+00:00")
        await _turn(mw, "I moved to Beijing.", "2024-03-10T10:00:00+00:00")
        await _turn(mw, "I moved to Shanghai.", "2024-06-01T10:00:00+00:00")
        stored = await _by_text(mw)
        (hangzhou,), (beijing,), (shanghai,) = (
            stored[f"User {text}."]
            for text in ("lives in Hangzhou", "moved to Beijing", "moved to Shanghai")
        )
        assert beijing["metadata"]["superseded_by"] == shanghai["id"]
        backend = mw.client_state.backend

        done = await backend.forget(beijing["id"])
        assert done.deleted and done.current_again == ()
        assert await _current(backend) == ["User moved to Shanghai."]
        after = await _by_text(mw)
        assert after["User lives in Hangzhou."][0]["metadata"]["superseded_by"] == shanghai["id"]
        assert after["User moved to Shanghai."][0]["metadata"]["supersedes"] == [hangzhou["id"]]

        # Forgetting Shanghai then brings Hangzhou back: nothing newer is left.
        done = await backend.forget(shanghai["id"])
        assert done.current_again == (hangzhou["id"],)
        assert await _current(backend) == ["User lives in Hangzhou."]


async def test_a_fact_told_again_stays_one_memory_when_the_change_between_is_forgotten(
    tmp_path: Path,
) -> None:
    mw = _middleware(tmp_path)
    async with mw:
        await _turn(mw, "I live in Hangzhou.", "2024-01-05T10:00:00+00:00")
        await _turn(mw, "I moved to Beijing.", "2024-03-10T10:00:00+00:00")
        await _turn(mw, "I live in Hangzhou.", "2024-06-01T10:00:00+00:00")
        stored = await _by_text(mw)
        (beijing,) = stored["User moved to Beijing."]
        backend = mw.client_state.backend
        assert await _current(backend) == ["User lives in Hangzhou."]

        # Beijing is hidden; forgetting it brings no second Hangzhou back.
        done = await backend.forget(beijing["id"])
        assert done.current_again == ()
        assert await _current(backend) == ["User lives in Hangzhou."]


async def test_a_newer_memory_of_the_same_fact_keeps_the_older_one_hidden(tmp_path: Path) -> None:
    mw = _middleware(tmp_path)
    async with mw:
        backend = mw.client_state.backend
        hangzhou = await _raw(backend, "User lives in Hangzhou.", "2024-01-05T10:00:00+00:00")
        beijing = await _raw(backend, "User moved to Beijing.", "2024-03-10T10:00:00+00:00")
        await backend.update_metadata(beijing, {"supersedes": [hangzhou]})
        await backend.update_metadata(
            hangzhou, {"superseded_by": beijing, "valid_until": "2024-03"}
        )
        # Told again, and never judged (a judgement that failed, say).
        again = await _raw(backend, "User lives in Hangzhou.", "2024-06-01T10:00:00+00:00")

        done = await backend.forget(beijing)
        assert done.current_again == ()
        current = await backend.get_all(READS, limit=50)
        assert [h.id for h in current] == [again]
        older = await backend.get(hangzhou)
        assert older is not None and older["metadata"]["duplicate_of"] == again
        # Forgetting the fact now forgets both tellings of it.
        done = await backend.forget(again)
        assert [h.id for h in done.repeats] == [hangzhou]
        assert await _current(backend) == []


async def test_a_memory_another_one_superseded_too_stays_hidden(tmp_path: Path) -> None:
    mw = _middleware(tmp_path)
    async with mw:
        backend = mw.client_state.backend
        hangzhou = await _raw(backend, "User lives in Hangzhou.", "2024-01-05T10:00:00+00:00")
        beijing = await _raw(backend, "User moved to Beijing.", "2024-03-10T10:00:00+00:00")
        shanghai = await _raw(backend, "User lives in Shanghai now.", "2024-03-11T10:00:00+00:00")
        # Two judgements at once (two searched scopes) superseded it; one mark won.
        await backend.update_metadata(beijing, {"supersedes": [hangzhou]})
        await backend.update_metadata(shanghai, {"supersedes": [hangzhou]})
        await backend.update_metadata(
            hangzhou, {"superseded_by": beijing, "valid_until": "2024-03"}
        )

        done = await backend.forget(beijing)
        assert done.current_again == ()
        assert await _current(backend) == ["User lives in Shanghai now."]
        older = await backend.get(hangzhou)
        assert older is not None and older["metadata"]["superseded_by"] == shanghai


async def test_forgetting_a_repeat_alone_leaves_the_fact(tmp_path: Path) -> None:
    mw = _middleware(tmp_path)
    async with mw:
        await _turn(mw, "I live in Hangzhou.", "2024-01-05T10:00:00+00:00")
        await _turn(mw, "I live in Hangzhou!", "2024-01-06T10:00:00+00:00")
        stored = await _by_text(mw)
        (kept,), (repeat,) = stored["User lives in Hangzhou."], stored["User lives in Hangzhou!"]
        backend = mw.client_state.backend
        done = await backend.forget(repeat["id"])
        assert await _current(backend) == ["User lives in Hangzhou."]
        left = await backend.get(kept["id"])
        assert left is not None and not left["metadata"].get("duplicates")
        assert done.deleted and done.repeats == () and done.current_again == ()


async def test_restore_makes_a_wrongly_merged_repeat_current_and_keeps_what_was_undone(
    tmp_path: Path,
) -> None:
    mw = _middleware(tmp_path)
    async with mw:
        await _turn(mw, "I live in Hangzhou.", "2024-01-05T10:00:00+00:00")
        await _turn(mw, "I live in Hangzhou!", "2024-02-05T10:00:00+00:00")
        backend = mw.client_state.backend
        (kept,) = await backend.get_all(READS, limit=50)
        told = [item for items in (await _by_text(mw)).values() for item in items]
        (repeat,) = [item for item in told if item["id"] != kept.id]
        reason = repeat["metadata"]["duplicate_reason"]
        assert reason.startswith("words")

        restored = await backend.restore(repeat["id"])
        assert restored is not None
        assert (restored.was, restored.by, restored.reason) == ("duplicate", kept.id, reason)
        entry = await backend.get(repeat["id"])
        assert entry is not None
        metadata = entry["metadata"]
        assert not metadata.get("duplicate_of") and not metadata.get("duplicate_reason")
        assert [undone["by"] for undone in metadata["restored"]] == [kept.id]
        assert metadata["restored"][0]["reason"] == reason
        kept_entry = await backend.get(kept.id)
        assert kept_entry is not None and not kept_entry["metadata"].get("duplicates")
        assert len(await _current(backend)) == 2
        # A current memory has nothing to undo.
        assert await backend.restore(repeat["id"]) is None
