"""What counts as a failure mem0's add swallowed (see _add_check)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from agentscope_mem0 import ExtractionFailedError
from agentscope_mem0._mem0.add_check import AddWatch, watch_add


@pytest.mark.parametrize(
    "answer",
    [
        '{"memory": []}',
        '```json\n{"memory": [{"id": "0", "text": "User likes tea."}]}\n```',
        'Here you go: {"memory": [{"id": "0", "text": "User likes tea."}]}',
        "",  # mem0 2.2 reads an empty answer as "no memories" as well
    ],
)
def test_answers_mem0_can_read_are_no_failure(answer: str) -> None:
    assert AddWatch(answers=[answer]).failure() is None


@pytest.mark.parametrize(
    "answer",
    [
        "I found nothing worth keeping.",
        '{"memory": [{"id": "0", "te',
        '{"facts": ["x"]}',
        None,
        # mem0 skips items without a non-empty "text": nothing would be stored.
        '{"memory": [{"id": "0", "fact": "User likes tea."}]}',
        '{"memory": [{"id": "0", "text": ""}, {"id": "1", "text": "User likes tea."}]}',
        '{"memory": ["User likes tea."]}',
    ],
)
def test_answers_mem0_cannot_read_are_a_failure(answer: Any) -> None:
    watch = AddWatch(answers=[answer])
    assert watch.failure() is not None
    with pytest.raises(ExtractionFailedError):
        watch.raise_if_failed()


def test_an_embedding_that_succeeds_on_mem0s_second_try_is_no_failure() -> None:
    calls: list[str] = []

    def embed(text: str, memory_action: str | None = None) -> list[float]:
        calls.append(text)
        if len(calls) == 1:
            raise ConnectionError("flaky")
        return [0.0]

    client = SimpleNamespace(llm=None, embedding_model=SimpleNamespace(embed=embed))
    with watch_add(client) as watch:
        with pytest.raises(ConnectionError):
            client.embedding_model.embed("User likes tea.", "add")
        assert watch.failure() is not None
        client.embedding_model.embed("User likes tea.", "add")  # mem0's one-by-one retry
    assert watch.failure() is None
    with watch_add(client) as other:  # wrapped once, watched per call
        client.embedding_model.embed("query", "search")
    assert other.failure() is None and calls.count("User likes tea.") == 2
