"""The user's profile: distilled in the background, checked, shown, edited, forgotten.

mem0 and the stores are real (local Qdrant + SQLite under tmp_path); the chat
model is scripted: it answers the profile's prompt with every fact it was
given plus an invented line and a superseded one, which the check must drop.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import HintBlock, Msg, UserMsg
from agentscope.tool import Toolkit
from click.testing import CliRunner, Result

from agentscope_mem0 import Mem0Middleware, SqliteWorkingStore
from agentscope_mem0._memories.lifecycle import SUPERSEDED_BY
from agentscope_mem0._profile.distil import read_profile
from agentscope_mem0._profile.record import PROFILE_OPEN, load_profile, save_profile
from agentscope_mem0._scope import Scope
from agentscope_mem0.cli import cli
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel
from fakes import real_memory

INVENTED = "Owns a yacht named Seabird"


def is_profile_request(messages: list[Msg]) -> bool:
    return any("short profile of a user" in m.get_text_content() or "" for m in messages)


class ProfileModel(ScriptedChatModel):
    """Extracts and judges by rule; answers the profile prompt with its facts,
    an invented line and "Lives in Porto"; can be held (``gate``) or fail."""

    def __init__(self, reply: str = "OK.", *, failures: int = 0) -> None:
        super().__init__(reply)
        self.prompts: list[str] = []
        self.gate: asyncio.Event | None = None
        self.failures = failures

    async def _call_api(self, model_name: str, messages: list[Msg], *args: Any, **kw: Any) -> Any:
        if not is_profile_request(messages):
            return await super()._call_api(model_name, messages, *args, **kw)
        self.prompts.append(messages[-1].get_text_content() or "")
        if self.gate is not None:
            await self.gate.wait()
        if self.failures:
            self.failures -= 1
            raise RuntimeError("the provider is down")
        facts = re.findall(r"^- User (.+)$", self.prompts[-1], re.M)
        answer = "\n".join(f"- {fact}" for fact in facts)
        return _text_response(f"{answer}\n- {INVENTED}\n- Lives in Porto")


def _text_response(text: str) -> Any:
    from agentscope.message import TextBlock
    from agentscope.model import ChatResponse

    return ChatResponse(content=[TextBlock(text=text)], is_last=True)


def _middleware(memory: Any, **parameters: Any) -> Mem0Middleware:
    mw = Mem0Middleware(
        user_id="ann",
        client=memory,
        parameters=Mem0Middleware.Parameters(profile=True, **parameters),
    )
    assert mw.client_state.profile is not None
    mw.client_state.profile.delay = 0.0
    mw.client_state.profile.retry_delay = 0.0
    return mw


async def _write(mw: Mem0Middleware, *sentences: str) -> None:
    for sentence in sentences:
        exchange = [{"role": "user", "content": sentence}, {"role": "assistant", "content": "Ok."}]
        await mw.client_state.writer.submit(Scope("ann", None), exchange, wait=True)
    assert await mw.client_state.flush(30)


async def _settled(mw: Mem0Middleware) -> None:
    assert mw.client_state.profile is not None
    assert await mw.client_state.profile.flush(30)


def _profile_text(mw: Mem0Middleware) -> str | None:
    record = load_profile(mw.client_state.profile_store, "ann")
    return record.content if record is not None else None


def _note(messages: list[Msg]) -> str:
    return "\n".join(
        str(b.hint)
        for m in messages
        if m.name == "memory"
        for b in m.content
        if isinstance(b, HintBlock)
    )


async def _reply(mw: Mem0Middleware, model: ScriptedChatModel, text: str = "Hi") -> None:
    agent = Agent(
        name="bot",
        system_prompt="",
        model=model,
        middlewares=[mw],
        toolkit=Toolkit(tools=await mw.list_tools()),
    )
    await agent.reply(UserMsg("user", text))


FACTS = (
    "I work as a nurse.",
    "I have a cat named Luna.",
    "I am allergic to penicillin.",
    "I am learning Spanish.",
    "I play the cello.",
)


# -- the check of the model's answer --------------------------------------------------


def test_lines_the_memories_do_not_say_are_dropped_in_both_languages() -> None:
    memories = ["User moved to Madrid in January 2026", "User has a cat named Luna"]
    done = read_profile(
        "Profile:\n- Lives in Madrid\n- Has a cat named Luna\n- Lives in Porto\n- Has 3 kids",
        memories,
        max_tokens=200,
    )
    assert done.lines == ["Lives in Madrid", "Has a cat named Luna"]
    assert done.dropped == ["Lives in Porto", "Has 3 kids"]
    zh = read_profile(
        "- 住在上海\n- 对花生过敏\n- 住在杭州", ["用户搬到了上海", "用户对花生过敏"], max_tokens=200
    )
    assert zh.lines == ["住在上海", "对花生过敏"] and zh.dropped == ["住在杭州"]


def test_the_profile_is_cut_to_its_token_budget() -> None:
    memories = [f"User visited city number {n}" for n in range(40)]
    answer = "\n".join(f"- Visited city number {n}" for n in range(40))
    done = read_profile(answer, memories, max_tokens=60)
    assert 0 < len(done.lines) < 40 and done.cut == 40 - len(done.lines)


# -- off by default -----------------------------------------------------------------


async def test_off_by_default_no_refresher_and_no_profile_in_the_note(
    store_config: dict[str, Any],
) -> None:
    assert Mem0Middleware.Parameters().profile is False
    memory = real_memory(store_config, ProfileModel())
    mw = Mem0Middleware(user_id="ann", client=memory)
    assert mw.client_state.profile is None
    save_profile(mw.client_state.profile_store, "ann", "- Works as a nurse")
    await _write(mw, *FACTS)
    model = ScriptedChatModel("Hello.")
    await _reply(mw, model)
    assert PROFILE_OPEN not in _note(model.calls[0])
    await mw.aclose()


# -- the refresh --------------------------------------------------------------------


async def test_refreshed_after_five_new_memories_checked_and_shown_first_in_the_note(
    store_config: dict[str, Any],
) -> None:
    extractor = ProfileModel()
    mw = _middleware(real_memory(store_config, extractor))
    await _write(mw, *FACTS[:4])
    await _settled(mw)
    assert extractor.prompts == [] and _profile_text(mw) is None  # 4 < 5: not yet
    await _write(mw, FACTS[4])
    await _settled(mw)
    assert len(extractor.prompts) == 1
    profile = _profile_text(mw)
    assert profile is not None
    for word in ("nurse", "Luna", "penicillin", "Spanish", "cello"):
        assert word in profile
    # Invented, and not in any memory: dropped by the check.
    assert INVENTED not in profile and "Porto" not in profile
    stats = mw.stats()
    assert stats["profile_refreshes"] == 1 and stats["profile_lines_dropped"] == 2
    assert stats["tokens_in_profile"] > 0 and stats["model_calls_profile"] == 1
    # Shown in the note, dated, before the memories.
    model = ScriptedChatModel("Hello.")
    await _reply(mw, model, "What do I play?")
    note = _note(model.calls[0])
    assert PROFILE_OPEN in note and "cello" in note.split("</user_profile>")[0]
    assert re.search(r"Profile of the user \(as of \d{4}-\d\d-\d\d\)", note)
    assert note.index(PROFILE_OPEN) < note.index("<memories>")
    await mw.aclose()


async def test_a_slow_model_never_slows_a_reply(store_config: dict[str, Any]) -> None:
    extractor = ProfileModel()
    mw = _middleware(real_memory(store_config, extractor))
    extractor.gate = asyncio.Event()  # the profile's model call hangs until set
    await _write(mw, *FACTS)
    assert mw.client_state.profile is not None
    while not extractor.prompts:  # the refresh is under way, held by the gate
        await asyncio.sleep(0.01)
    model = ScriptedChatModel("Hello.")
    await asyncio.wait_for(_reply(mw, model), 60)  # returns while the refresh waits
    assert mw.stats()["profile_waiting"] == 1 and _profile_text(mw) is None
    extractor.gate.set()
    await _settled(mw)
    assert "cello" in (_profile_text(mw) or "")
    await mw.aclose()


async def test_an_edit_made_while_the_model_writes_is_kept(store_config: dict[str, Any]) -> None:
    extractor = ProfileModel()
    mw = _middleware(real_memory(store_config, extractor))
    extractor.gate = asyncio.Event()
    await _write(mw, *FACTS)
    while not extractor.prompts:
        await asyncio.sleep(0.01)
    save_profile(mw.client_state.profile_store, "ann", "- Prefers to be called Annie")
    extractor.gate.set()
    await _settled(mw)
    assert _profile_text(mw) == "- Prefers to be called Annie"
    await mw.aclose()


async def test_superseded_memories_never_reach_the_model_and_a_change_refreshes_at_once(
    store_config: dict[str, Any],
) -> None:
    extractor = ProfileModel()
    mw = _middleware(real_memory(store_config, extractor))
    await _write(mw, "I live in Porto.", "I work as a nurse.")
    state = mw.client_state
    hits = await state.backend.get_all(Scope("ann"), limit=10)
    porto = next(h for h in hits if "Porto" in h.memory)
    nurse = next(h for h in hits if "nurse" in h.memory)
    assert await state.backend.update_metadata(str(porto.id), {SUPERSEDED_BY: nurse.id})
    assert state.profile is not None
    state.profile.changed(Scope("ann"))  # what the judgement signals after a supersede
    await _settled(mw)
    assert len(extractor.prompts) == 1 and "Porto" not in extractor.prompts[0]
    assert "nurse" in extractor.prompts[0]
    profile = _profile_text(mw) or ""
    assert "nurse" in profile and "Porto" not in profile  # the model said it; the check dropped it
    await mw.aclose()


async def test_forget_memory_redistils_the_profile_without_the_fact(
    store_config: dict[str, Any],
) -> None:
    extractor = ProfileModel()
    mw = _middleware(
        real_memory(store_config, extractor),
        tools=("search_memory", "add_memory", "forget_memory"),
    )
    await _write(mw, *FACTS)
    await _settled(mw)
    assert "cello" in (_profile_text(mw) or "")
    hits = await mw.client_state.backend.get_all(Scope("ann"), limit=10)
    cello = next(str(h.id) for h in hits if "cello" in h.memory)
    forget = {t.name: t for t in await mw.list_tools()}["forget_memory"]
    await forget.call(memory_ids=[cello])
    await _settled(mw)
    assert len(extractor.prompts) == 2 and "cello" not in extractor.prompts[-1]
    profile = _profile_text(mw) or ""
    assert "nurse" in profile and "cello" not in profile
    await mw.aclose()


async def test_a_failed_refresh_is_logged_and_tried_again(
    store_config: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    extractor = ProfileModel(failures=1)
    mw = _middleware(real_memory(store_config, extractor))
    await _write(mw, *FACTS)
    await _settled(mw)
    assert len(extractor.prompts) == 2  # failed once, then again at once (retry_delay 0)
    assert "cello" in (_profile_text(mw) or "")
    assert mw.stats()["profile_refresh_failures"] == 1
    assert "was not refreshed" in caplog.text
    await mw.aclose()


async def test_a_reply_that_finds_no_profile_asks_for_one(store_config: dict[str, Any]) -> None:
    extractor = ProfileModel()
    mw = _middleware(real_memory(store_config, extractor))
    await _write(mw, *FACTS[:2])  # below the threshold
    await _settled(mw)
    assert _profile_text(mw) is None
    await _reply(mw, ScriptedChatModel("Hello."))
    await _settled(mw)
    assert "nurse" in (_profile_text(mw) or "")
    await mw.aclose()


def test_the_profile_is_no_conversation_of_working_memory(tmp_path: Path) -> None:
    store = SqliteWorkingStore(tmp_path)
    save_profile(store, "ann", "- Works as a nurse")
    store.update("ann", "session-1", lambda old: "notes", kind="text")
    assert store.conversations("ann") == ["session-1"]
    store.close()


# -- the command line and forgetting ------------------------------------------------


def profile_model() -> ProfileModel:
    """The chat model `--refresh` builds (AGENTSCOPE_MEM0_CHAT_MODEL=module:attr)."""
    return ProfileModel()


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_cli_shows_edits_refreshes_clears_and_forget_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "data"

    async def remember() -> None:
        mw = Mem0Middleware.local(
            user_id="ann",
            chat_model=ProfileModel(),
            embedding_model=HashEmbedding(),
            folder=folder,
        )
        await _write(mw, *FACTS[:2])
        await mw.aclose()

    asyncio.run(remember())  # the commands run loops of their own
    monkeypatch.setenv("AGENTSCOPE_MEM0_EMBEDDER", "hash:256")
    assert run("profile", "ann", "--folder", str(folder)).exit_code == 1  # none yet
    edited = run("profile", "ann", "--folder", str(folder), "--edit", "- Works nights")
    assert edited.exit_code == 0 and "Works nights" in edited.output
    monkeypatch.setenv("AGENTSCOPE_MEM0_CHAT_MODEL", f"{__name__}:profile_model")
    refreshed = run("profile", "ann", "--folder", str(folder), "--refresh")
    assert refreshed.exit_code == 0, refreshed.output
    assert "nurse" in refreshed.output and INVENTED in refreshed.output  # named as left out
    shown = run("profile", "ann", "--folder", str(folder), "--json")
    assert "nurse" in shown.output and INVENTED not in shown.output
    assert run("profile", "ann", "--folder", str(folder), "--clear").exit_code == 0
    assert run("profile", "ann", "--folder", str(folder)).exit_code == 1
    run("profile", "ann", "--folder", str(folder), "--edit", "- Works as a nurse")
    forgot = run("forget", "--user", "ann", "--all", "--yes", "--folder", str(folder))
    assert forgot.exit_code == 0, forgot.output
    assert run("profile", "ann", "--folder", str(folder)).exit_code == 1
