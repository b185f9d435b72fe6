"""What mem0's ``add`` compares a write with: the current memories of its own scope.

mem0 2.2's ``AsyncMemory.add`` searches the ten memories most like the new
messages (filtered by the write's ``user_id`` and ``agent_id``), shows them to
the extraction model as "Existing Memories", which skips a fact it finds
there, and drops any extracted fact whose text hashes like one of them. Both
would treat a superseded memory as still known: after "User moved to
Beijing" superseded "User lives in Hangzhou", "I live in Hangzhou." told
again would store nothing. A repeat merged into another memory would do the
same, and a write filed under no agent would find the facts of every agent
(mem0 filters by the ids the write names): a fact only one agent's reads show
would keep it from the user's own memories, which every agent reads.

:func:`compare_with_current` wraps the store's ``search`` once per store so
that, inside this package's ``add`` (the call context holds its said time),
the search leaves out memories that are superseded or merged (see
:mod:`.._memories.lifecycle`) and, for a write of no agent, those of an agent;
it asks the store for more to fill their places. Every other search passes
unchanged. The compact prompt (:mod:`.extraction`) takes its existing memories
from mem0's prompt, so it sees the same.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from typing import Any

from .._memories.lifecycle import DUPLICATE_OF, SUPERSEDED_BY
from .call_context import current

__all__ = ["compare_with_current"]

_MARK = "_agentscope_mem0_compares_current"
_INSTALL_LOCK = threading.Lock()

_OVERFETCH = 3
"""Times the asked number of memories fetched, so the current ones can fill the places."""


def compare_with_current(client: Any) -> None:
    """Make ``client``'s store show this package's ``add`` current memories only.

    Idempotent; a client without a vector store (hosted mem0) is left alone.
    """
    store = getattr(client, "vector_store", None)
    if store is None:
        return
    with _INSTALL_LOCK:
        if getattr(store, _MARK, False):
            return
        store.search = _current_only(store.search)
        setattr(store, _MARK, True)


def _current_only(search: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(search)
    def current_search(*args: Any, **kwargs: Any) -> Any:
        top_k = kwargs.get("top_k")
        # mem0 2.2's add passes everything by name; the said time marks this package's add.
        if current().said is None or args or not isinstance(top_k, int) or top_k < 1:
            return search(*args, **kwargs)
        filters = kwargs.get("filters") or {}
        found = search(**{**kwargs, "top_k": top_k * _OVERFETCH})
        if not isinstance(found, list):
            return found
        return [hit for hit in found if _compared(hit, filters)][:top_k]

    return current_search


def _compared(hit: Any, filters: Mapping[str, Any]) -> bool:
    """Whether the add under way compares its facts with ``hit``."""
    payload = getattr(hit, "payload", None)
    if not isinstance(payload, dict):
        return True
    if payload.get(SUPERSEDED_BY) or payload.get(DUPLICATE_OF):
        return False
    # A write of no agent: another agent's memory is not the user's own.
    return bool(filters.get("agent_id")) or not payload.get("agent_id")
