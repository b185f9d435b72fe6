"""The compact extraction prompt, and small models' extraction answers: repaired where
unambiguous, a failed and retryable write where mem0 would silently keep nothing."""

from __future__ import annotations

from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import Msg, UserMsg
from mem0.configs.prompts import ADDITIVE_EXTRACTION_PROMPT, generate_additive_extraction_prompt

from agentscope_mem0 import ConfigurationError, Mem0Middleware
from agentscope_mem0._mem0.call_context import calling
from agentscope_mem0._mem0.extraction import (
    COMPACT_CONTEXT_TOKENS,
    COMPACT_SYSTEM_PROMPT,
    compact_extraction,
    repair_extraction_answer,
)
from agentscope_mem0._text.tokens import estimate_tokens
from agentscope_mem0.service import mem0_middleware_factory
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel, is_extraction_request

PARAGRAPH = (
    "Here is a longer explanation of how sourdough fermentation works, with the "
    "temperatures, the hydration and the timing spelled out step by step. "
)


def _mem0_prompt(conversation: str) -> list[dict[str, Any]]:
    existing = [{"id": str(i), "text": f"User keeps habit number {i}"} for i in range(10)]
    earlier = [{"role": "user", "content": f"earlier message {i} " * 40} for i in range(10)]
    user = generate_additive_extraction_prompt(
        existing_memories=existing,
        new_messages=conversation,
        last_k_messages=earlier,
        timestamp="2024-03-10",
    )
    return [
        {"role": "system", "content": ADDITIVE_EXTRACTION_PROMPT},
        {"role": "user", "content": user},
    ]


def test_the_compact_prompt_fits_a_4k_context_with_a_long_reply() -> None:
    conversation = (
        "user: I live in Hangzhou and I am allergic to peanuts. How do I bake sourdough?\n"
        f"assistant: {PARAGRAPH * 300}The last step: bake at 250 C for 40 minutes.\n"
    )
    messages = _mem0_prompt(conversation)
    assert estimate_tokens(messages[0]["content"]) > 7000  # mem0's own, before anything
    assert compact_extraction(messages) is messages  # not asked for: unchanged
    with calling(extraction="compact"):
        system, user = compact_extraction(messages)
    assert system == {"role": "system", "content": COMPACT_SYSTEM_PROMPT}
    text = user["content"]
    assert estimate_tokens(COMPACT_SYSTEM_PROMPT + text) <= COMPACT_CONTEXT_TOKENS - 600
    assert "user: I live in Hangzhou and I am allergic to peanuts." in text  # the user's whole
    assert "[...]" in text and "bake at 250 C for 40 minutes." in text  # reply: head and tail
    assert "## Observation Date\n2024-03-10" in text
    assert text.count("User keeps habit number") == 5
    assert text.count("earlier message") <= 2 * 20


def test_a_short_exchange_is_kept_whole() -> None:
    messages = _mem0_prompt("user: I moved to Beijing last month.\nassistant: Noted!\n")
    with calling(extraction="compact"):
        _, user = compact_extraction(messages)
    assert (
        "## New Messages\nuser: I moved to Beijing last month.\nassistant: Noted!"
        in (user["content"])
    )


@pytest.mark.parametrize(
    ("answer", "texts"),
    [
        ('```json\n{"memory": [{"id": "0", "text": "User likes tea"}]}\n```', ["User likes tea"]),
        ('Sure!\n{"memory": [{"id": "0", "text": "User likes tea"}]}\nDone.', ["User likes tea"]),
        ('{"memory": ["User likes tea", "User is 30"]}', ["User likes tea", "User is 30"]),
    ],
)
def test_wrapped_answers_are_repaired(answer: str, texts: list[str]) -> None:
    import json

    repaired = json.loads(repair_extraction_answer(answer))
    assert [item["text"] for item in repaired["memory"]] == texts


def test_ambiguous_answers_are_left_alone() -> None:
    two = '{"memory": [{"text": "a"}]} {"memory": [{"text": "b"}]}'
    assert repair_extraction_answer(two) == two
    plain = '{"memory": [{"id": "0", "text": "User likes tea"}]}'
    assert repair_extraction_answer(plain) is plain


class Answers(ScriptedChatModel):
    """Answers mem0's extraction prompt with the given texts in turn (the last repeating)."""

    def __init__(self, *answers: str) -> None:
        super().__init__(extractor=None)
        self.answers = list(answers)
        self.prompts: list[list[Msg]] = []

    async def _call_api(self, model_name: str, messages: list[Msg], **kwargs: Any) -> Any:
        if is_extraction_request(messages):
            self.prompts.append(list(messages))
            answer = self.answers[min(len(self.prompts) - 1, len(self.answers) - 1)]
            return await ScriptedChatModel(answer, extractor=None)._call_api(
                model_name, messages, **kwargs
            )
        return await super()._call_api(model_name, messages, **kwargs)


def _middleware(tmp_path: Any, model: ScriptedChatModel, **options: Any) -> Mem0Middleware:
    return Mem0Middleware.local(
        user_id="alice",
        chat_model=model,
        embedding_model=HashEmbedding(),
        folder=tmp_path / "data",
        mode="static_control",
        parameters=Mem0Middleware.Parameters(**{"judge": False, **options}),
    )


async def _tell(mw: Mem0Middleware, text: str) -> None:
    bot = Agent(
        name="helper", system_prompt="x", model=ScriptedChatModel("Noted."), middlewares=[mw]
    )
    await bot.reply(UserMsg(name="user", content=text, created_at="2024-03-10T10:00:00+00:00"))


async def _memories(mw: Mem0Middleware) -> dict[str, dict[str, Any]]:
    raw = await mw.client.get_all(filters={"user_id": "alice"})
    return {item["memory"]: item for item in raw["results"]}


async def test_compact_extraction_end_to_end(tmp_path: Any) -> None:
    model = ScriptedChatModel()
    mw = _middleware(tmp_path, model, extraction="compact", judge=True)  # it stores the dates
    async with mw:
        await _tell(mw, "I moved to Beijing last month.")
        assert await mw.flush(timeout=30)
        (call,) = model.extraction_calls
        assert call[0].get_text_content() == COMPACT_SYSTEM_PROMPT
        stored = await _memories(mw)
        moved = stored["User moved to Beijing last month."]
        assert moved["metadata"]["event_date"] == "2024-02"
        stats = mw.stats()
        assert stats["model_calls_extraction"] == 1 and stats["tokens_writes"] == 1
        assert 0 < stats["tokens_in_per_write"] < 1000

    default = ScriptedChatModel()
    mw = _middleware(tmp_path / "default", default)
    async with mw:
        await _tell(mw, "I moved to Beijing last month.")
        assert await mw.flush(timeout=30)
        (call,) = default.extraction_calls
        assert call[0].get_text_content() == ADDITIVE_EXTRACTION_PROMPT
        assert mw.stats()["tokens_in_per_write"] > 7000


async def test_a_wrapped_answer_is_stored(tmp_path: Any) -> None:
    fenced = 'Here you go:\n```json\n{"memory": [{"id": "0", "text": "User likes tea"}]}\n```'
    mw = _middleware(tmp_path, Answers(fenced))
    async with mw:
        await _tell(mw, "I like tea.")
        assert await mw.flush(timeout=30)
        assert list(await _memories(mw)) == ["User likes tea"]


async def test_items_without_text_are_a_failed_retryable_write(tmp_path: Any) -> None:
    textless = '{"memory": [{"id": "0", "fact": "User likes tea"}]}'
    good = '{"memory": [{"id": "0", "text": "User likes tea"}]}'
    model = Answers(*[textless] * 6, good)
    mw = _middleware(tmp_path, model)
    async with mw:
        writer = mw.client_state.writer
        writer._delivery._retry = type(writer._delivery._retry)(initial_delay=0.01, max_delay=0.01)
        await _tell(mw, "I like tea.")
        assert await mw.flush(timeout=30)
        stats = mw.stats()
        assert (stats["writes_stored"], stats["writes_failed"]) == (0, 1)
        (row,) = await writer.failed()
        assert 'no "text"' in (row.error or "")
        assert await _memories(mw) == {}
        assert await writer.retry_failed() == 1
        assert await mw.flush(timeout=30)
        assert list(await _memories(mw)) == ["User likes tea"]


def test_compact_needs_an_agentscope_extraction_model(tmp_path: Any) -> None:
    from types import SimpleNamespace

    from agentscope_mem0._mem0.backend import Mem0Backend

    with pytest.raises(ConfigurationError, match="another LLM provider"):
        Mem0Backend(SimpleNamespace(llm=object()), extraction="compact")
    assert Mem0Backend(SimpleNamespace(llm=object())).extraction == "mem0"
    with pytest.raises(ConfigurationError, match="extraction"):
        _middleware(tmp_path, ScriptedChatModel(), extraction="short")


async def test_the_service_factory_passes_compact_on(tmp_path: Any) -> None:
    factory = mem0_middleware_factory(
        chat_model=ScriptedChatModel(),
        embedding_model=HashEmbedding(),
        folder=tmp_path / "data",
        parameters=Mem0Middleware.Parameters(extraction="compact"),
    )
    async with factory.running():
        (mw,) = await factory("alice", "helper", "s1")
        assert mw.client_state.backend.extraction == "compact"
