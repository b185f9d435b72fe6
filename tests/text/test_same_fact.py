"""What :mod:`agentscope_mem0._text.same_fact` keeps between turns."""

from __future__ import annotations

from agentscope_mem0._text.same_fact import fact_shape, same_fact, user_names


def test_a_memory_recalled_again_is_not_read_again() -> None:
    # The note and the time judgement read the same memories turn after turn,
    # on the event loop: a memory's shape is read once per text and names.
    names = user_names("alice_smith")
    first = fact_shape("User's sister Alice lives in Hangzhou.", names)
    assert fact_shape("User's sister Alice lives in Hangzhou.", names) is first
    other_names = fact_shape("User's sister Alice lives in Hangzhou.", frozenset())
    assert other_names is not first and other_names != first  # Alice is the user only by name
    assert same_fact(first, fact_shape("User's sister Alice lives in Hangzhou", names))
