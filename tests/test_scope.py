"""Ids mem0 can store: user ids refused at construction, agent names made ids."""

from __future__ import annotations

from typing import Any

import pytest

from agentscope_mem0 import ConfigurationError, Mem0Middleware
from agentscope_mem0._scope import agent_id_from_name, check_agent_id
from agentscope_mem0.service import check_user_id
from fakes import RecordingClient, note_text, one_session, real_memory


@pytest.mark.parametrize("user_id", ["alice smith", "alice\tsmith", "a\u00a0b", "a\u2028b"])
def test_user_ids_with_whitespace_inside_are_refused_at_construction(
    user_id: str, store_config: dict[str, Any]
) -> None:
    with pytest.raises(ConfigurationError, match="whitespace inside") as info:
        Mem0Middleware(user_id=user_id, client=real_memory(store_config))
    assert "alice_smith" in str(info.value) or "a_b" in str(info.value)  # says what to use
    with pytest.raises(ConfigurationError):
        check_agent_id(user_id)


@pytest.mark.parametrize(
    "user_id", ["ali\u200bce", "alice\x00", "a\ud800b", "bob\u2060", "a\ufe0fb", "\u3164x"]
)
def test_ids_with_an_invisible_character_are_refused(user_id: str) -> None:
    # They would list as "alice", "bob", ... beside the real ones; a lone
    # surrogate cannot even be encoded to be stored (the reply failed).
    with pytest.raises(ConfigurationError, match="invisible character") as info:
        check_user_id(user_id)
    assert "Remove it" in str(info.value)
    with pytest.raises(ConfigurationError, match="invisible character"):
        check_agent_id(user_id)


async def test_the_service_gives_an_invisible_id_a_reply_without_memory(
    store_config: dict[str, Any],
) -> None:
    from agentscope_mem0.service import mem0_middleware_factory

    factory = mem0_middleware_factory(client=real_memory(store_config))
    assert await factory("ali\u200bce", "assistant", "s") == []
    assert await factory("a\ud800b", "assistant", "s") == []
    assert len(await factory("alice", "assistant", "s")) == 1
    await factory.aclose()


def test_what_mem0_itself_accepts_is_accepted() -> None:
    for user_id in ("alice", "alice_smith", "u-1", "42", "用户", "a*b", "alice@example.com"):
        assert check_user_id(user_id) == user_id


def test_agent_names_become_ids_deterministically() -> None:
    assert agent_id_from_name("Research Assistant") == "Research_Assistant"
    assert agent_id_from_name("  Research \t Assistant \n") == "Research_Assistant"
    assert agent_id_from_name("研究 助手") == "研究_助手"
    assert agent_id_from_name("assistant") == "assistant"
    # The documented collision: whitespace and underscores read the same.
    assert agent_id_from_name("Research_Assistant") == agent_id_from_name("Research Assistant")


async def test_an_agent_named_with_spaces_stores_and_recalls(store_config: dict[str, Any]) -> None:
    memory = RecordingClient(real_memory(store_config))
    mw = Mem0Middleware(user_id="alice", client=memory, mode="static_control")
    await one_session(mw, "I live in Hangzhou.", agent="Research Assistant")
    assert await mw.flush(30)
    assert mw.stats()["writes_stored"] == 1

    model = await one_session(mw, "Where do I live?", agent="Research Assistant")

    assert "Hangzhou" in note_text(model.calls[0])
    assert {k["agent_id"] for _, k in memory.named("add")} == {"Research_Assistant"}
    assert {k["filters"]["agent_id"] for _, k in memory.named("search")} == {"Research_Assistant"}
    await mw.aclose()


async def test_an_explicit_agent_id_with_spaces_is_refused(store_config: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError, match="whitespace inside"):
        Mem0Middleware(user_id="alice", client=real_memory(store_config), agent_id="my agent")
