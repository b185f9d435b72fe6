"""Consolidation when a time judge runs: the judge's candidate search and readings
decide "the same fact", the words veto; and the scope both look in. Real mem0 on
the embedded store; only the chat model is scripted."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from agentscope_mem0 import Mem0Middleware, Scope
from agentscope_mem0._memories.lifecycle import (
    DUPLICATE_OF,
    DUPLICATES,
    SUPERSEDED_BY,
    SUPERSEDES,
    VALID_UNTIL,
)
from agentscope_mem0._text.dates import iso
from agentscope_mem0._write.judge import ChangePlan
from agentscope_mem0._write.judge_pairs import Fact
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

QUESTIONS = {
    "User lives in Hangzhou.": ("Where does the user live?", "Hangzhou"),
    "User's home is in Hangzhou.": ("Where does the user live?", "Hangzhou"),
    "User's home city is Hangzhou.": ("Where does the user live?", "Hangzhou"),
    "User moved to Beijing.": ("Where does the user live?", "Beijing"),
    "User drinks green tea every morning.": ("What does the user drink?", "green tea"),
}


def reader(questions: dict[str, tuple[str, str]]) -> Callable[[str], str]:
    """A model that reads each memory as ``questions`` says: a memory answers its
    own question with its answer, and any other question with "not said"."""

    def answer(prompt: str) -> str:
        memory, _, question = prompt.partition("\nQuestion: ")
        memory = memory.removeprefix("Memory: ").strip()
        asked, reply = questions.get(memory, (f"What about {memory}?", memory))
        if not question:
            return json.dumps({"question": asked, "answer": reply})
        return reply if question.strip() == asked else "not said"

    return answer


def yes_man(prompt: str) -> str:
    """A model that reads every memory as saying the user lives in Hangzhou."""
    if "\nQuestion: " in prompt:
        return "Hangzhou"
    return json.dumps({"question": "Where does the user live?", "answer": "Hangzhou"})


def _middleware(tmp_path: Path, model: ScriptedChatModel, **options: Any) -> Mem0Middleware:
    return Mem0Middleware.local(
        user_id="alice",
        chat_model=model,
        embedding_model=HashEmbedding(),
        folder=tmp_path / "data",
        mode="static_control",
        **options,
    )


async def _store(mw: Mem0Middleware, text: str, agent: str | None = "helper") -> str:
    """Store ``text`` verbatim as written by ``agent`` and let the background pass run."""
    state = mw.client_state
    scope = Scope("alice", agent)
    said = datetime.now(UTC)
    results = await state.backend.add(
        [{"role": "user", "content": text}], scope, infer=False, said_at=said
    )
    state.follow_up.stored(scope, results, said)
    assert await mw.flush(timeout=60)
    return str(results[0]["id"])


async def _marks(mw: Mem0Middleware) -> dict[str, dict[str, Any]]:
    raw = await mw.client.get_all(filters={"user_id": "alice"}, top_k=100)
    return {item["memory"]: item["metadata"] or {} for item in raw["results"]}


def _questions_of(model: ScriptedChatModel) -> list[str]:
    return [call[-1].get_text_content() or "" for call in model.judge_calls]


async def test_the_model_finds_a_repeat_the_words_leave_open(tmp_path: Path) -> None:
    model = ScriptedChatModel(judge=reader(QUESTIONS))
    mw = _middleware(tmp_path, model)
    async with mw:
        kept = await _store(mw, "User lives in Hangzhou.")
        await _store(mw, "User's home is in Hangzhou.")
        await _store(mw, "User drinks green tea every morning.")
        marks = await _marks(mw)
        assert marks["User's home is in Hangzhou."]["duplicate_of"] == kept
        repeat = await mw.client.get_all(filters={"user_id": "alice"}, top_k=100)
        repeat_id = next(m["id"] for m in repeat["results"] if "home" in m["memory"])
        assert marks["User lives in Hangzhou."]["duplicates"] == [repeat_id]
        assert not marks["User drinks green tea every morning."].get("duplicate_of")
        stats = mw.stats()
        assert stats["judge_merged"] == 1 and stats["judge_same"] == 1
        # One background pass: the judge's search is the only one per new memory.
        assert "consolidation_batches" not in stats or stats["consolidation_batches"] == 0
        current = await mw.client_state.backend.get_all(Scope("alice", "helper"), limit=10)
        assert sorted(h.memory for h in current) == [
            "User drinks green tea every morning.",
            "User lives in Hangzhou.",
        ]


async def test_a_repeat_the_words_show_costs_no_model_call(tmp_path: Path) -> None:
    model = ScriptedChatModel(judge=reader(QUESTIONS))
    mw = _middleware(tmp_path, model)
    async with mw:
        kept = await _store(mw, "The user wants charts in dark mode.")
        asked_before = len(model.judge_calls)
        await _store(mw, "User wants their charts dark mode.")
        assert len(model.judge_calls) == asked_before
        marks = await _marks(mw)
        assert marks["User wants their charts dark mode."]["duplicate_of"] == kept
        assert mw.stats()["judge_merged"] == 1


@pytest.mark.parametrize(
    "other",
    [
        "User's sister lives in Hangzhou.",  # another person
        "User does not live in Hangzhou.",  # negation
        "User lived in Hangzhou in 2019.",  # another time
        "User has lived in Hangzhou for 3 years.",  # a number
        "User lives in Hangzhou with two cats.",  # more detail
        "User wants to live in Hangzhou.",  # another verb
        "User is moving to Hangzhou.",  # another verb, a word of its own on each side
    ],
)
async def test_the_words_veto_what_the_model_reads_as_the_same(tmp_path: Path, other: str) -> None:
    model = ScriptedChatModel(judge=yes_man)
    mw = _middleware(tmp_path, model)
    async with mw:
        await _store(mw, "User lives in Hangzhou.")
        await _store(mw, other)
        marks = await _marks(mw)
        assert not marks[other].get("duplicate_of")
        assert not marks["User lives in Hangzhou."].get("duplicates")
        stats = mw.stats()
        assert stats["judge_merged"] == 0
        # The model was asked, and said "the same" unless the holder differed.
        if "sister" not in other:
            assert stats["judge_vetoed"] >= 1
    # Told the same by a model and by the words, a paraphrase does merge.
    model = ScriptedChatModel(judge=yes_man)
    mw = _middleware(tmp_path / "same", model)
    async with mw:
        await _store(mw, "User lives in Hangzhou.")
        await _store(mw, "User's home city is Hangzhou.")
        assert (await _marks(mw))["User's home city is Hangzhou."].get("duplicate_of")


async def test_a_failing_model_still_merges_what_the_words_show(tmp_path: Path) -> None:
    def broken(prompt: str) -> str:
        raise RuntimeError("the model server is down")

    mw = _middleware(tmp_path, ScriptedChatModel(judge=broken))
    async with mw:
        kept = await _store(mw, "User likes hiking.")
        await _store(mw, "The user enjoys hiking.")
        await _store(mw, "User's home is in Hangzhou.")
        marks = await _marks(mw)
        assert marks["The user enjoys hiking."]["duplicate_of"] == kept
        assert mw.stats()["judge_skipped"] >= 1


async def test_a_repeat_that_changes_a_memory_has_the_kept_one_supersede_it() -> None:
    """The model found that the new memory changes one candidate before it found the
    candidate it repeats: the memory kept stands for it, dated by the repeat."""
    counts = dict.fromkeys(("superseded", "capped", "extended", "merged", "dated"), 0)
    plan = ChangePlan(2, counts)
    first, second, third = (datetime(2024, month, 1, tzinfo=UTC) for month in (1, 2, 3))
    kept = Fact("kept", "User lives in Beijing.", said=first, duplicates=["older-repeat"])
    changed = Fact("hangzhou", "User lives in Hangzhou.", said=second)
    repeat = Fact("repeat", "User's home is in Beijing.", said=third)

    holder = plan.merge(repeat, kept, "model: test")
    plan.supersede(holder, changed, "model: test")
    assert plan.changes["repeat"][DUPLICATE_OF] == "kept"
    assert plan.changes["kept"][DUPLICATES] == ["older-repeat", "repeat"]
    assert plan.changes["kept"][SUPERSEDES] == ["hangzhou"]
    assert plan.changes["hangzhou"][SUPERSEDED_BY] == "kept"
    assert plan.changes["hangzhou"][VALID_UNTIL] == iso(third)
    assert counts["merged"] == 1 and counts["superseded"] == 1

    class Recorder:
        def __init__(self) -> None:
            self.order: list[str] = []

        async def update_metadata(self, memory_id: str, changes: dict[str, Any]) -> bool:
            self.order.append(memory_id)
            return True

    backend = Recorder()
    await plan.write(backend, Scope("alice"), timeout=5)  # type: ignore[arg-type]
    # What hides a memory is stored last: a stop halfway hides nothing.
    assert backend.order[0] == "kept" and set(backend.order[1:]) == {"repeat", "hangzhou"}


@pytest.mark.parametrize("judge", [True, False])
async def test_consolidation_looks_where_the_reads_look(tmp_path: Path, judge: bool) -> None:
    options = {"parameters": Mem0Middleware.Parameters(judge=judge)}
    model = ScriptedChatModel(judge=reader(QUESTIONS))
    # Reads of the whole user: another agent's memory and one of no agent (the
    # built-in middleware's) are the same fact for this agent too.
    mw = _middleware(tmp_path / "user-wide", model, scope_search_by_agent=False, **options)
    async with mw:
        planner = await _store(mw, "User lives in Hangzhou.", agent="planner")
        await _store(mw, "The user lives in Hangzhou.", agent="helper")
        builtin = await _store(mw, "User wants charts in dark mode.", agent=None)
        await _store(mw, "The user wants charts in dark mode.", agent="helper")
        marks = await _marks(mw)
        assert marks["The user lives in Hangzhou."]["duplicate_of"] == planner
        assert marks["The user wants charts in dark mode."]["duplicate_of"] == builtin

    # Reads by agent: each agent's memories are its own, repeats across agents stay.
    mw = _middleware(tmp_path / "by-agent", ScriptedChatModel(judge=reader(QUESTIONS)), **options)
    async with mw:
        await _store(mw, "User lives in Hangzhou.", agent="planner")
        await _store(mw, "The user lives in Hangzhou.", agent="helper")
        marks = await _marks(mw)
        assert not marks["The user lives in Hangzhou."].get("duplicate_of")
        await _store(mw, "User lives in Hangzhou!", agent="helper")
        assert (await _marks(mw))["User lives in Hangzhou!"].get("duplicate_of")
