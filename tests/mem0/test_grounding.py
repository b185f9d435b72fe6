"""What gets stored: only what the user's side of the exchange says, in the user's
language, by the user's own rules; nothing the package itself showed the model."""

from __future__ import annotations

import json
from typing import Any

from agentscope.agent import Agent
from agentscope.message import Msg, UserMsg

from agentscope_mem0 import Mem0Middleware
from agentscope_mem0._recall.note import note_text
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel, is_extraction_request


def _proposals(*texts: str) -> str:
    return json.dumps({"memory": [{"id": str(i), "text": t} for i, t in enumerate(texts)]})


class Extractor(ScriptedChatModel):
    """Proposes the given memories to every extraction, answers the check's
    question with ``check``; records both prompts."""

    def __init__(self, *proposals: str, check: Any = "NO") -> None:
        super().__init__(check, extractor=None)
        self.answer = _proposals(*proposals)
        self.prompts: list[str] = []
        self.questions: list[str] = []

    async def _call_api(self, model_name: str, messages: list[Msg], **kwargs: Any) -> Any:
        text = "\n".join(m.get_text_content() or "" for m in messages)
        if is_extraction_request(messages):
            self.prompts.append(text)
            return await ScriptedChatModel(self.answer, extractor=None)._call_api(
                model_name, messages, **kwargs
            )
        self.questions.append(text)
        return await super()._call_api(model_name, messages, **kwargs)


def _middleware(tmp_path: Any, model: ScriptedChatModel, **parameters: Any) -> Mem0Middleware:
    return Mem0Middleware.local(
        user_id="alice",
        chat_model=model,
        embedding_model=HashEmbedding(),
        folder=tmp_path / "data",
        mode="static_control",
        parameters=Mem0Middleware.Parameters(**{"judge": False, **parameters}),
    )


async def _tell(mw: Mem0Middleware, text: str, answer: Any = "Noted.") -> None:
    bot = Agent(name="helper", system_prompt="x", model=ScriptedChatModel(answer), middlewares=[mw])
    await bot.reply(UserMsg(name="user", content=text))
    assert await mw.flush(timeout=30)


async def _stored(mw: Mem0Middleware) -> set[str]:
    raw = await mw.client.get_all(filters={"user_id": "alice"})
    return {item["memory"] for item in raw["results"]}


ADOPTED = "I just adopted a beagle named Max. What should I feed him?"
REPLY = "Congratulations! Beagles do well on a measured diet; Royal Canin puppy food is popular."
PROPOSED = (
    "User adopted a beagle named Max.",
    "User was recommended Royal Canin puppy food.",
    "User's favourite park is Griffith Park in Los Angeles.",
)


async def test_only_what_the_user_said_is_stored(tmp_path: Any) -> None:
    mw = _middleware(tmp_path, Extractor(*PROPOSED))
    async with mw:
        await _tell(mw, ADOPTED, REPLY)
        assert await _stored(mw) == {"User adopted a beagle named Max."}
        stats = mw.stats()
        assert stats["memories_kept_grounded"] == 1
        assert stats["memories_dropped_assistant"] == 1  # the reply's product
        assert stats["memories_dropped_ungrounded"] == 1  # nobody named the park
        assert stats["grounding_model_checks"] == 0  # the words decided


async def test_unchecked_stores_what_the_extraction_proposed(tmp_path: Any) -> None:
    mw = _middleware(tmp_path, Extractor(*PROPOSED), grounded=False)
    async with mw:
        await _tell(mw, ADOPTED, REPLY)
        assert await _stored(mw) == set(PROPOSED)
        assert mw.stats()["memories_dropped_ungrounded"] == 0


async def test_a_memory_keeps_the_language_the_user_spoke(tmp_path: Any) -> None:
    model = Extractor("User now drives a Tesla Model 3.", "用户现在开特斯拉Model 3。")
    mw = _middleware(tmp_path, model, extraction="compact")
    async with mw:
        await _tell(mw, "我现在开的是一辆特斯拉Model 3。", "不错！")
        assert await _stored(mw) == {"用户现在开特斯拉Model 3。"}
        assert mw.stats()["memories_dropped_language"] == 1
    assert "write every memory in the user's language" in model.prompts[0]


async def test_what_the_words_cannot_decide_is_asked_once(tmp_path: Any) -> None:
    # Half the words are the user's: the model decides, and says no.
    model = Extractor("User plans to travel with family in autumn.", check="NO")
    mw = _middleware(tmp_path, model, remember="travel plans")
    async with mw:
        await _tell(mw, "We might travel in autumn, not sure yet.")
        assert await _stored(mw) == set()
        stats = mw.stats()
        assert stats["grounding_model_checks"] == 1
        assert stats["memories_dropped_ungrounded"] == 1
    (question,) = model.questions
    assert "We might travel in autumn" in question and "travel plans" in question

    yes = Extractor("User plans to travel with family in autumn.", check="YES")
    mw = _middleware(tmp_path / "yes", yes)
    async with mw:
        await _tell(mw, "We might travel in autumn, not sure yet.")
        assert await _stored(mw) == {"User plans to travel with family in autumn."}


async def test_the_users_rules_reach_both_extraction_prompts(tmp_path: Any) -> None:
    for extraction in ("mem0", "compact"):
        model = Extractor("User likes tea.")
        mw = _middleware(
            tmp_path / extraction,
            model,
            extraction=extraction,
            remember="my diet and drinks",
            ignore="anything about my health",
        )
        async with mw:
            await _tell(mw, "I like tea.")
        (prompt,) = model.prompts
        assert "my diet and drinks" in prompt, extraction
        assert "anything about my health" in prompt, extraction
        assert "Do not keep the assistant's answers" in prompt or extraction == "compact"


async def test_the_note_the_assistant_quotes_is_not_written_back(tmp_path: Any) -> None:
    def quote_the_note(messages: list[Msg], tools: Any) -> str:
        note = next(note_text(m) for m in messages if note_text(m))
        return f"Here is what I recall: {note}\nSo you live in Hangzhou."

    model = ScriptedChatModel()  # extracts with the offline rules
    mw = _middleware(tmp_path, model)
    async with mw:
        await _tell(mw, "I live in Hangzhou.")
        await _tell(mw, "What do you remember about me?", quote_the_note)
    last = "\n".join(m.get_text_content() or "" for m in model.extraction_calls[-1])
    assert "So you live in Hangzhou." in last
    assert "<memories>" not in last and "Relevant memories" not in last


async def test_what_the_user_never_wants_remembered_is_not_stored(tmp_path: Any) -> None:
    def judge(messages: list[Msg], tools: Any) -> str:
        question = messages[-1].get_text_content() or ""
        return "NO" if "Proposal: User has asthma" in question else "YES"

    model = Extractor("User likes green tea.", "User has asthma.", check=judge)
    mw = _middleware(tmp_path, model, ignore="my health")
    async with mw:
        await _tell(mw, "I like green tea. I have asthma.")
        assert await _stored(mw) == {"User likes green tea."}
        stats = mw.stats()
        assert stats["memories_dropped_ignored"] == 1, (stats, model.questions)
        assert stats["grounding_model_checks"] == 2
    assert all("my health" in question for question in model.questions)
