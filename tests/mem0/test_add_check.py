"""What counts as a failure mem0's add swallowed (see _add_check)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from agentscope_mem0 import (
    EdgeEngineError,
    ExtractionFailedError,
    Mem0Backend,
    RetryPolicy,
    Scope,
    WriteQueue,
    build_local_memory,
)
from agentscope_mem0._mem0.add_check import AddWatch, watch_add
from agentscope_mem0.local import close_shared_clients
from agentscope_mem0.testing import HashEmbedding, RuleExtractor, ScriptedChatModel


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


async def test_a_memory_the_store_refused_inside_mem0s_add_is_sent_again(
    tmp_path: Path,
) -> None:
    """mem0 logs and skips a memory its store refuses, returning the others;
    the writer sees it, removes what the call stored and sends it again."""
    memory = build_local_memory(
        ScriptedChatModel(extractor=RuleExtractor()),
        embedding_model=HashEmbedding(64),
        folder=tmp_path,
    )
    insert = memory.vector_store.insert
    refusals: list[str] = []

    def refuse_one_once(*args: Any, **kwargs: Any) -> Any:
        payloads = kwargs.get("payloads") or []
        if not refusals and any("fruit01" in str(p.get("data")) for p in payloads):
            if len(payloads) == 1:  # mem0's one-by-one second try of a refused batch
                refusals.append("fruit01")
            raise EdgeEngineError("Qdrant Edge upsert failed: Input/output error")
        return insert(*args, **kwargs)

    memory.vector_store.insert = refuse_one_once
    queue = WriteQueue(
        Mem0Backend(memory), outbox_dir=tmp_path, retry=RetryPolicy(initial_delay=0.01)
    )
    said = "I like fruit00. I like fruit01. I like fruit02."
    await queue.submit(Scope("alice"), [{"role": "user", "content": said}])
    assert await queue.flush(60)
    stored = memory.vector_store.list(filters={"user_id": "alice"}, top_k=100)[0]
    texts = sorted(str(item.payload["data"]) for item in stored)
    assert refusals == ["fruit01"]
    assert texts == ["User likes fruit00.", "User likes fruit01.", "User likes fruit02."]
    assert queue.stats()["writes_retried"] == 1
    await queue.aclose()
    close_shared_clients(tmp_path)
