"""An agent's reads that also find its user's memories filed under no agent.

AgentScope's built-in middleware writes without an ``agent_id`` by default,
so a store it filled holds memories of the user alone; this package files
each agent's memories under the agent. A read of
``Scope(user, agent, with_user_level=True)`` finds both: ``agent_id`` is the
agent's, or the memory has none. mem0 2.2's filter dictionary has no "field
absent" operator, so the condition is written for the filter translation of
each store that can say it, and read in one call. Any other mem0 store is
read once too, by user, with headroom (:func:`user_wide_limit`), and the
entries of other agents are dropped here: a second read (one more query
embedding and round trip) comes only when they crowded out the agent's own.

mem0 2.2's ``search`` hands keys spelled ``$or`` / ``$not`` to the store as
they are (its own operator processing looks for ``AND`` / ``OR`` / ``NOT``),
and ``get_all`` hands every filter over unchanged.
"""

from __future__ import annotations

from typing import Any

__all__ = ["merge_user_level", "one_read_filters", "user_wide_limit"]


def one_read_filters(client: Any, user_id: str, agent_id: str) -> dict[str, Any] | None:
    """mem0 filters reading the agent's and the user-level memories in one call.

    Returns:
        ``None`` when ``client`` is not a mem0 ``AsyncMemory`` on a store whose
        filter translation can say "agent_id absent" (then read by user and
        filtered here).
    """
    from .._server.qdrant_config import PROVIDER as SERVER_PROVIDER
    from ..local import EDGE_PROVIDER

    store = getattr(getattr(client, "config", None), "vector_store", None)
    provider = getattr(store, "provider", None)
    if provider in ("qdrant", SERVER_PROVIDER, EDGE_PROVIDER):
        # mem0's Qdrant store turns "ne" into MatchExcept, which a point without
        # the field never satisfies (the server provider and Qdrant Edge alike): NOT (agent_id != X)
        # holds for agent_id X and for no agent_id at all.
        return {"user_id": user_id, "$not": [{"agent_id": {"ne": agent_id}}]}
    if provider == "pgvector":
        # SQL's "!=" is NULL on an absent key, so the same trick finds nothing
        # there; mem0's pgvector store reads "*" as "the key exists".
        return {
            "user_id": user_id,
            "$or": [{"agent_id": agent_id}, {"$not": [{"agent_id": "*"}]}],
        }
    return None


def user_wide_limit(limit: int) -> int:
    """Entries to read by user so that ``limit`` of one agent's and the user's
    own are likely among them, when other agents' memories are mixed in."""
    # mem0 2.2 ranks max(4 * top_k, 60) candidates whatever top_k is: headroom is cheap.
    return max(4 * limit, 20)


def merge_user_level(
    agents: list[Any], users: list[Any], limit: int, *, by_score: bool
) -> list[Any]:
    """The agent's entries and the user's entries of no agent, as one read's answer.

    Args:
        agents: The agent's entries (read with its filter, or picked out of
            ``users``).
        users: mem0's entries for the user's filter (every agent's); only those
            without an ``agent_id`` are kept.
        limit: Entries at most.
        by_score: Order by mem0's ``score``, best first (a search); otherwise
            the agent's entries first (a listing).
    """
    seen = {entry.get("id") for entry in agents if isinstance(entry, dict)}
    extra = [
        entry
        for entry in users
        if isinstance(entry, dict) and not entry.get("agent_id") and entry.get("id") not in seen
    ]
    merged = [*agents, *extra]
    if by_score:
        merged.sort(key=_score, reverse=True)
    return merged[:limit]


def _score(entry: Any) -> float:
    score = entry.get("score") if isinstance(entry, dict) else None
    return float(score) if isinstance(score, int | float) else 0.0
