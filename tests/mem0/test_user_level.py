"""Merging an agent's read with its user's memories of no agent (stores read twice)."""

from __future__ import annotations

from agentscope_mem0 import Scope
from agentscope_mem0._mem0.user_level import merge_user_level


def test_searched_scope_of_an_agent_also_reads_the_user_level_memories() -> None:
    scope = Scope("u", "a")
    assert scope.searched(by_agent=True) == Scope("u", "a", with_user_level=True)
    assert scope.searched(by_agent=False) == Scope("u")
    assert Scope("u").searched(by_agent=True) == Scope("u")


def test_merge_keeps_the_agents_and_the_user_level_entries_best_first() -> None:
    agents = [
        {"id": "1", "agent_id": "a", "score": 0.5},
        {"id": "2", "agent_id": "a", "score": 0.2},
    ]
    users = [
        {"id": "1", "agent_id": "a", "score": 0.5},  # the agent's again
        {"id": "3", "agent_id": "b", "score": 0.9},  # another agent's
        {"id": "4", "score": 0.7},  # the user's, no agent
        {"id": "5", "agent_id": None, "score": 0.1},
        "not an entry",
    ]
    merged = merge_user_level(agents, users, 3, by_score=True)
    assert [e["id"] for e in merged] == ["4", "1", "2"]
    listing = merge_user_level(agents, users, 10, by_score=False)
    assert [e["id"] for e in listing] == ["1", "2", "4", "5"]
