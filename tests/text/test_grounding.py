"""Whether a proposed memory is grounded in what the user said: the words' reading."""

from __future__ import annotations

import pytest

from agentscope_mem0._text.grounding import Grounding, read_answer, read_grounding, third_person


@pytest.mark.parametrize(
    ("user", "assistant", "memory", "reading"),
    [
        # the user's own statements
        (
            "I just adopted a beagle named Max.",
            "Congrats!",
            "User adopted a beagle named Max.",
            "grounded",
        ),
        (
            "My sister Ana teaches math in Porto.",
            "Nice.",
            "User's sister Ana teaches math.",
            "grounded",
        ),
        (
            "Remember that my badge number is 4471.",
            "Noted.",
            "User's badge number is 4471.",
            "grounded",
        ),
        ("我现在在一家银行做数据分析师。", "很好。", "用户在银行做数据分析师。", "grounded"),
        # the assistant's answer or claim
        (
            "Which planet is the largest?",
            "Jupiter is the largest planet.",
            "The largest planet is Jupiter.",
            "assistant",
        ),
        (
            "Can you suggest a weekend activity?",
            "Since you love hiking, try a day hike.",
            "User loves hiking.",
            "assistant",
        ),
        (
            "Tell me a joke about computers.",
            "Why did the computer go to the doctor?",
            "The assistant provided a joke about computers.",
            "assistant",
        ),
        ("推荐一本书吧。", "推荐《活着》。", "助手推荐了《活着》。", "assistant"),
        # nobody said it
        (
            "Thanks, that's all for now.",
            "You're welcome!",
            "User found a new pet cat at the local animal shelter.",
            "ungrounded",
        ),
        ("I like tea.", "Me too.", "User's favourite tea shop is Lumen in Oslo.", "ungrounded"),
        # the user's question or request restated
        (
            "Write a story about a fisherman named Tomas in Lisbon.",
            "Tomas fished...",
            "User wants a story about a fisherman named Tomas in Lisbon.",
            "question",
        ),
        (
            "If I save 20 percent of 5000 a month, how much is that in a year?",
            "12,000.",
            "If User saves 20 percent of 5000 a month, how much is that in a year?",
            "question",
        ),
        # switched language
        ("我现在开的是一辆特斯拉。", "不错！", "User drives a Tesla.", "language"),
        ("I live in Hangzhou.", "Nice.", "用户住在杭州。", "language"),
    ],
)
def test_the_words_read_a_proposal(user: str, assistant: str, memory: str, reading: str) -> None:
    assert read_grounding(memory, Grounding(user, assistant)) == reading


def test_a_standing_wish_is_a_statement_not_a_request() -> None:
    said = Grounding("Make my charts dark mode by default.", "Sure, done.")
    assert read_grounding("User wants charts in dark mode by default.", said) == "grounded"


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ("YES", True),
        ("Yes, the user said so.", True),
        ("no.", False),
        ("是", True),
        ("不是", False),
        ("I cannot tell", None),
    ],
)
def test_the_models_yes_or_no(answer: str, said: bool | None) -> None:
    assert read_answer(answer) is said


@pytest.mark.parametrize(
    ("memory", "told"),
    [
        ("I moved to Beijing last month.", "User moved to Beijing last month."),
        (
            "My wife Priya and I are expecting twins.",
            "User's wife Priya and User are expecting twins.",
        ),
        ("I'm lactose intolerant.", "User is lactose intolerant."),
        ("我对花生过敏。", "用户对花生过敏。"),
        ("User likes tea.", "User likes tea."),
    ],
)
def test_a_memory_in_the_first_person_is_told_of_the_user(memory: str, told: str) -> None:
    assert third_person(memory) == told
