"""One fact, one memory: write-time consolidation on real mem0 (embedded store),
only the chat model scripted; the same-fact rule on the benchmark's pair set."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import ToolResultState

from agentscope_mem0 import Mem0Middleware, Scope
from agentscope_mem0._text.same_fact import (
    SameFactRule,
    as_user,
    blocker,
    fact_shape,
    first_repeat,
    kept_apart,
    same_fact,
    user_names,
)
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

PAIRS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "consolidation_pairs.jsonl"


def _pairs() -> list[dict[str, Any]]:
    return [json.loads(line) for line in PAIRS.read_text().splitlines() if line.strip()]


def _judge(pair: dict[str, Any], similarity: float | None) -> bool:
    names = user_names(pair["user"], [pair["a"], pair["b"]])
    a, b = fact_shape(pair["a"], names), fact_shape(pair["b"], names)
    return same_fact(a, b, similarity=similarity)


def test_no_distinct_facts_merge_even_when_the_vectors_say_identical() -> None:
    pairs = _pairs()
    apart = [p for p in pairs if not p["same"]]
    assert len(apart) > 150
    for similarity in (None, 1.0):
        wrong = [(p["a"], p["b"]) for p in apart if _judge(p, similarity)]
        assert wrong == [], similarity
    same = [p for p in pairs if p["same"]]
    merged = sum(_judge(p, 1.0) for p in same)
    lexical = sum(_judge(p, None) for p in same)
    assert merged >= 0.9 * len(same)
    assert lexical >= 0.8 * len(same)
    # A low similarity keeps apart what only the vectors could have joined.
    assert sum(_judge(p, 0.5) for p in same) == lexical


def test_what_blocks_a_merge_is_named() -> None:
    names = user_names("alice")
    cases = {
        ("User's sister lives in Hangzhou.", "Alice lives in Hangzhou."): "another person",
        ("User does not live in Beijing.", "User lives in Beijing."): "negation",
        ("User lived there in 2019.", "User lives there."): "numbers",
        ("User used to live in Beijing.", "User lives in Beijing."): "time",
        ("User lived in Beijing.", "User lives in Beijing."): "time",
        ("User has two cats.", "User has 3 cats."): "numbers",
        ("Bob lives in Hangzhou.", "User lives in Hangzhou."): "another person",
        ("User prefers tea over coffee.", "User prefers coffee over tea."): "comparison",
    }
    for (a, b), reason in cases.items():
        assert blocker(fact_shape(a, names), fact_shape(b, names)) == reason, (a, b)
    alice = fact_shape("Alice lives in Hangzhou.", names)
    assert same_fact(alice, fact_shape("The user lives in Hangzhou.", names))
    assert as_user("Alice's cat likes ALICE.", names) == "User's cat likes User."


@pytest.mark.parametrize(
    ("a", "b", "reason"),
    [
        # Who did what to whom (issue #37: 5 of 5 such pairs were merged).
        ("User owes Tom 500 dollars.", "Tom owes User 500 dollars.", "another person"),
        ("User reports to Lisa.", "Lisa reports to User.", "another person"),
        ("User's tutor is Ana.", "User is Ana's tutor.", "another person"),
        # Values, whole and in order: dates, codes, signs, grades, currencies.
        ("User's exam is on 2024-03-04.", "User's exam is on 2024-04-03.", "numbers"),
        ("User's locker code is 1234.", "User's locker code is 4321.", "numbers"),
        (
            "User keeps the freezer at -18 degrees.",
            "User keeps the freezer at 18 degrees.",
            "numbers",
        ),
        ("User got an A+ in physics.", "User got an A- in physics.", "numbers"),
        ("User saved $2000 for the trip.", "User saved €2000 for the trip.", "currency"),
        ("User earns 5000 dollars a month.", "User earns 5000 euros a month.", "currency"),
        # Prepositions that change the fact.
        ("User works for Google.", "User works with Google.", "another relation"),
        ("User's daughter is over 30.", "User's daughter is 30.", "another relation"),
        # What the user is, and what the user has someone be.
        ("User employs a gardener.", "User works as a gardener.", "role"),
        ("User sees a dentist.", "User is a dentist.", "role"),
        ("User sees a dentist every year.", "User is a dentist.", "time"),
        ("User prefers tea to coffee.", "User prefers coffee to tea.", "comparison"),
        # An activity is not the thing.
        ("User likes fishing.", "User likes fish.", "another word"),
        # Nothing in common but the holder.
        ("User has a cold.", "User is chilly about the idea.", "nothing in common"),
    ],
)
def test_the_words_keep_apart_what_differs_in_holder_relation_or_value(
    a: str, b: str, reason: str
) -> None:
    """What no reading may merge: the words veto it (and never merge it themselves)."""
    names = user_names("alice")
    first, second = fact_shape(a, names), fact_shape(b, names)
    assert kept_apart(first, second) == reason == kept_apart(second, first)
    assert not same_fact(first, second, similarity=1.0)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("User owes Tom 500 dollars.", "User owes 500 dollars to Tom."),
        ("User's rent is $1,500.", "User's rent is $1500."),
        ("User is vegetarian.", "The user is a vegetarian."),
        ("User's favorite food is sushi.", "Sushi is the user's favorite food."),
        ("User goes running on weekends.", "User runs on weekends."),
        ("User plays chess on Sundays.", "User plays chess every Sunday."),
        ("User works for Google.", "User works at Google."),
        ("User uses Vim as their editor.", "User uses Vim as the editor."),
    ],
)
def test_repeats_in_other_words_still_read_as_one_fact(a: str, b: str) -> None:
    names = user_names("alice")
    assert kept_apart(fact_shape(a, names), fact_shape(b, names)) is None


def test_one_word_swapped_in_a_long_memory_is_another_fact() -> None:
    """However many words two memories share, the words alone never merge a swap."""
    names = user_names("alice")
    swaps = [
        (
            "User wants the weekly sales dashboard charts in dark mode on the office monitor.",
            "User wants the weekly sales dashboard charts in light mode on the office monitor.",
        ),
        (
            "User keeps a detailed travel journal about trips through northern Italy by train.",
            "User keeps a detailed travel journal about trips through southern Italy by train.",
        ),
        (
            "User orders a large oat milk latte with cinnamon at the corner cafe each morning.",
            "User orders a large almond milk latte with cinnamon at the corner cafe each morning.",
        ),
    ]
    for a, b in swaps:
        assert not same_fact(fact_shape(a, names), fact_shape(b, names)), (a, b)
    # A light verb may still differ, and a reordering is no swap.
    for a, b in (
        ("User works as a nurse at a hospital in Lyon.", "User is a nurse at a hospital in Lyon."),
        ("User wants charts in dark mode.", "User wants dark mode for charts."),
        # However few the other words, where both say what the user is or name
        # the same amounts.
        ("User works as a nurse.", "User is a nurse."),
        ("User's monthly rent is $1500.", "User pays $1500 rent per month."),
    ):
        assert same_fact(fact_shape(a, names), fact_shape(b, names)), (a, b)
    # Elsewhere a light verb may be the fact: an illness is no temperature.
    assert not same_fact(fact_shape("User has a cold.", names), fact_shape("User is cold.", names))


def test_a_word_of_its_own_written_as_a_verb_vetoes_any_reading_as_the_same() -> None:
    """What a model may read as one fact, the words keep apart when each side has a
    word of its own and one of them is written as a verb (pairs a small model merged)."""
    names = user_names("alice")
    for a, b in (
        ("User is learning to play the cello.", "User teaches the cello."),
        ("User likes reading science fiction.", "User likes writing science fiction."),
    ):
        assert kept_apart(fact_shape(a, names), fact_shape(b, names)) == "another verb"
    # Another word for the same thing is left to the model.
    for a, b in (
        ("User lives in Hangzhou.", "User's home is in Hangzhou."),
        ("User prefers responses in Arabic.", "The user prefers answers in Arabic."),
    ):
        assert kept_apart(fact_shape(a, names), fact_shape(b, names)) is None


def test_user_names_come_from_the_id_and_the_memories() -> None:
    assert user_names("wei_zhang") == {"wei", "zhang"}
    assert "mia" in user_names("u-1", ["User's name is Mia."])
    names = user_names("u-1", ["The user's name is Mia."])
    assert same_fact(fact_shape("Mia likes jazz.", names), fact_shape("User likes jazz.", names))


def test_a_stricter_rule_merges_less() -> None:
    pair = {"user": "alice", "a": "User practices yoga.", "b": "User does yoga."}
    names = user_names("alice")
    a, b = fact_shape(pair["a"], names), fact_shape(pair["b"], names)
    assert not same_fact(a, b)
    assert same_fact(a, b, similarity=0.99)
    assert not same_fact(a, b, similarity=0.99, rule=SameFactRule(cosine=0.995))
    assert not same_fact(a, b, similarity=0.96)


async def test_one_function_decides_a_repeat_by_words_then_by_embeddings() -> None:
    names = user_names("alice")
    shape = fact_shape("User practices yoga.", names)
    others = [
        fact_shape(text, names)
        for text in ("User's sister practices yoga.", "User does yoga.", "User practices yoga!")
    ]
    asked: list[list[int]] = []

    async def similarities(indices: list[int]) -> list[float | None]:
        asked.append(indices)
        return [0.99 for _ in indices]

    # The words show the third: nothing is embedded.
    assert await first_repeat(shape, others, similarities=similarities) == 2
    assert asked == []
    # Without it, only the pair the words leave open is embedded, never the sister's.
    assert await first_repeat(shape, others[:2], similarities=similarities) == 1
    assert asked == [[1]]
    # Without embeddings (hosted mem0) the words decide alone.
    assert await first_repeat(shape, others[:2]) is None


def _middleware(tmp_path: Path, **options: Any) -> Mem0Middleware:
    return Mem0Middleware.local(
        user_id="alice",
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(),
        folder=tmp_path / "data",
        **options,
    )


async def _store(mw: Mem0Middleware, text: str, scope: Scope) -> list[dict[str, Any]]:
    backend = mw.client_state.backend
    said = datetime.now(UTC)
    results = await backend.add(
        [{"role": "user", "content": text}], scope, infer=False, said_at=said
    )
    mw.client_state.follow_up.stored(scope, results, said)
    assert await mw.flush(timeout=60)
    return results


async def _everything(mw: Mem0Middleware) -> dict[str, dict[str, Any]]:
    raw = await mw.client.get_all(filters={"user_id": "alice"})
    return {item["memory"]: item for item in raw["results"]}


async def test_a_repeat_is_marked_kept_in_history_and_forgotten_with_the_kept_one(
    tmp_path: Path,
) -> None:
    mw = _middleware(tmp_path, parameters=Mem0Middleware.Parameters(judge=False))
    scope = Scope("alice", "helper")
    async with mw:
        await _store(mw, "The user wants charts in dark mode.", scope)
        await _store(mw, "User wants their charts dark mode.", scope)
        await _store(mw, "Alice lives in Hangzhou.", scope)
        await _store(mw, "The user lives in Hangzhou.", scope)
        await _store(mw, "User's sister lives in Hangzhou.", scope)
        await _store(mw, "User does not live in Beijing.", scope)
        backend = mw.client_state.backend
        current = sorted(h.memory for h in await backend.get_all(scope, limit=20))
        assert current == [
            "Alice lives in Hangzhou.",
            "The user wants charts in dark mode.",
            "User does not live in Beijing.",
            "User's sister lives in Hangzhou.",
        ]
        found = await backend.search("where does the user live", scope, top_k=10)
        assert "The user lives in Hangzhou." not in [h.memory for h in found]

        stored = await _everything(mw)
        kept, repeat = stored["Alice lives in Hangzhou."], stored["The user lives in Hangzhou."]
        assert repeat["metadata"]["duplicate_of"] == kept["id"]
        assert repeat["metadata"]["valid_until"]
        assert kept["metadata"]["duplicates"] == [repeat["id"]]
        assert mw.stats()["consolidation_merged"] == 2

        assert await backend.delete(kept["id"])
        left = await _everything(mw)
        assert "The user lives in Hangzhou." not in left and "Alice lives in Hangzhou." not in left
        assert "User's sister lives in Hangzhou." in left


async def test_without_an_embedder_repeats_merge_by_words(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mw = _middleware(tmp_path, parameters=Mem0Middleware.Parameters(judge=False))
    scope = Scope("alice", "helper")
    async with mw:
        backend = mw.client_state.backend

        async def no_embedder(texts: list[str]) -> None:
            return None  # as for hosted mem0: the lexical rule alone

        monkeypatch.setattr(backend, "embed", no_embedder)
        await _store(mw, "User practices yoga.", scope)
        await _store(mw, "User does yoga.", scope)
        await _store(mw, "User likes hiking.", scope)
        await _store(mw, "The user enjoys hiking.", scope)
        stored = await _everything(mw)
        assert not stored["User does yoga."]["metadata"].get("duplicate_of")
        assert stored["The user enjoys hiking."]["metadata"]["duplicate_of"]


async def test_forget_memory_on_the_kept_one_forgets_the_repeat_too_and_says_so(
    tmp_path: Path,
) -> None:
    mw = _middleware(
        tmp_path,
        mode="both",
        parameters=Mem0Middleware.Parameters(
            judge=False, tools=("search_memory", "add_memory", "forget_memory")
        ),
    )
    scope = Scope("alice", "helper")
    async with mw:
        await _store(mw, "The user wants charts in dark mode.", scope)
        await _store(mw, "User wants their charts dark mode.", scope)
        stored = await _everything(mw)
        kept = stored["The user wants charts in dark mode."]["id"]
        repeat = stored["User wants their charts dark mode."]["id"]
        assert stored["User wants their charts dark mode."]["metadata"]["duplicate_of"] == kept

        tools = {tool.name: tool for tool in await mw.list_tools()}
        bot = Agent(name="helper", system_prompt="x", model=ScriptedChatModel(), middlewares=[mw])
        mw._bind_agent(bot)
        found = await tools["search_memory"].call(keywords=["charts"], _agent_state=bot.state)
        assert kept in found.content[0].text and repeat not in found.content[0].text

        # Asked to forget both, the tool forgets the fact once and refuses nothing.
        done = await tools["forget_memory"].call(memory_ids=[kept, repeat], _agent_state=bot.state)
        assert done.state == ToolResultState.SUCCESS
        answer = done.content[0].text
        assert f"Forgot 1 memories: {kept}." in answer
        assert f"Forgot their repeats too (the same fact said again): {repeat}." in answer
        assert "current again" not in answer and "No memory" not in answer
        assert await _everything(mw) == {}
