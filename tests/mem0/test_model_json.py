"""The JSON object in a model's answer, found where that is unambiguous, in linear time."""

from __future__ import annotations

import time

import pytest

from agentscope_mem0._text.model_json import MAX_ANSWER_CHARS, find_json_object


@pytest.mark.parametrize(
    "answer",
    [
        '{"memory": []}',
        '```json\n{"memory": []}\n```',
        '```\n{"memory": []}\n```',
        'Here is the JSON:\n{"memory": []}\nLet me know if you need more.',
        'Sure! ```json\n{"memory": []}\n``` I kept nothing, as {asked}.',
        '<think>the {user} said hi</think>{"memory": []}',
        '<think>a</think>Here: <think>{"b": 1}</think>{"memory": []}',
        'Keys like {this} aside: {"memory": []}',
    ],
)
def test_one_object_is_found_in_its_wrapping(answer: str) -> None:
    assert find_json_object(answer) == {"memory": []}


@pytest.mark.parametrize(
    "answer",
    [
        '{"memory": []} or maybe {"memory": [{"text": "x"}]}',  # two objects: a guess
        '```json\n{"a": 1}\n```\n```json\n{"b": 2}\n```',  # two fences
        '{"memory": [{"id": "0", "te',  # cut off
        '[{"memory": []}]',  # not an object
        "I found nothing worth keeping.",
        "",
    ],
)
def test_no_object_or_more_than_one_is_none(answer: str) -> None:
    assert find_json_object(answer) is None


@pytest.mark.parametrize(
    "hostile",
    [
        "{" * (MAX_ANSWER_CHARS - 10),
        '{"x": ' * (MAX_ANSWER_CHARS // 7),
        "{ a } " * (MAX_ANSWER_CHARS // 7),
        '{"memory": "' + "a" * (MAX_ANSWER_CHARS - 20),
        "```" * (MAX_ANSWER_CHARS // 4),
        "<think>" * (MAX_ANSWER_CHARS // 8),
    ],
    ids=["braces", "open-objects", "brace-prose", "unterminated", "fences", "unclosed-thinking"],
)
def test_a_hostile_answer_costs_linear_time(hostile: str) -> None:
    # The judge's old fallback regex took 1.8 s on 40k braces and grew with the
    # square of the length: this size would have taken about a minute.
    started = time.perf_counter()
    assert find_json_object(hostile) is None
    assert time.perf_counter() - started < 5.0


def test_an_answer_over_the_limit_is_not_searched() -> None:
    assert find_json_object("x" * MAX_ANSWER_CHARS + '{"a": 1}') is None
