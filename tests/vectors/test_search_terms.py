"""The terms of a search, as the code below it reads them."""

from __future__ import annotations

import contextvars
from typing import Any

from agentscope_mem0._vectors.search_terms import search_terms, searching_with


class _Pause:
    def __await__(self) -> Any:
        yield


def test_terms_set_by_a_coroutine_closed_in_another_context_end_quietly() -> None:
    # A script that ends without closing leaves searches unfinished; the garbage
    # collector closes them wherever it runs, and leaving the block must not raise.
    async def searching() -> None:
        with searching_with(results_kept=3):
            assert search_terms().results_kept == 3
            await _Pause()

    coro = searching()
    contextvars.copy_context().run(coro.send, None)
    contextvars.copy_context().run(coro.close)
    assert search_terms().results_kept is None


def test_the_terms_hold_within_the_block_only() -> None:
    with searching_with(cosine_floor=0.3):
        with searching_with(results_kept=5):
            assert (search_terms().cosine_floor, search_terms().results_kept) == (0.3, 5)
        assert search_terms().results_kept is None
    assert search_terms().cosine_floor is None
