"""The time judgement's two questions to the model, and reading its answers.

The judgement never asks a model "does this replace that?": small models
answer yes to nearly every pair (a 1.5B model said so for 8 of 8 pairs,
unrelated ones included). It asks two reading questions instead, about one
memory at a time, which small models answer well:

* :data:`QUESTION_PROMPT`: which question does this memory answer, and what
  is its answer? (``{"question": ..., "answer": ...}``); for a memory in
  Chinese, :data:`QUESTION_PROMPT_CHINESE` asks for both in Chinese.
* :data:`READ_PROMPT`: answer this question from this memory alone, or say
  ``not said``.
* :data:`STILL_TRUE_PROMPT`, asked only when the new memory's words end a
  thing the older one names: does this memory say that statement (the older
  memory) has stopped being true? ``no``, ``yes`` or ``not said``. Asked of
  every pair, a small model would answer "no" for many a pair that shares a
  word; asked of these, it tells "quit smoking" ending "smokes a pack a day"
  from "quit smoking" beside "loves smoked salmon".

:mod:`.judge_pairs` compares the answers. Both prompts open with
:data:`JUDGE_MARK` (the shipped test model recognises them by it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .._text.escape import escape_memory
from .._text.lexicon import CHINESE, lexicon_for
from .._text.model_json import find_json_object

__all__ = [
    "JUDGE_MARK",
    "QUESTION_PROMPT",
    "QUESTION_PROMPT_CHINESE",
    "READ_PROMPT",
    "STILL_TRUE_PROMPT",
    "FactQuestion",
    "asks_yes_or_no",
    "is_not_said",
    "parse_question",
    "parse_reading",
    "question_prompt",
    "question_request",
    "read_request",
    "says_no",
    "still_true_request",
    "timeless",
]

JUDGE_MARK = "Memory Timeline Judge"
"""Words that open both prompts."""

QUESTION_PROMPT = f"""You are the {JUDGE_MARK}. You read one memory about a person. \
Write the question this memory answers about that person, asked about how things are \
now (what the memory leaves true, not the event or when it happened), and the memory's \
answer to it in a few words.

Examples:
Memory: Tom's favourite band is Queen -> {{"question": "What is Tom's favourite band?", \
"answer": "Queen"}}
Memory: User switched to a standing desk -> {{"question": "What kind of desk does the user \
use?", "answer": "a standing desk"}}
Memory: User's daughter started school in Leeds -> {{"question": "Where does the user's \
daughter go to school?", "answer": "Leeds"}}
Memory: User sold their piano -> {{"question": "Does the user own a piano?", "answer": "no"}}

Answer with JSON only: {{"question": "...", "answer": "..."}}"""

QUESTION_PROMPT_CHINESE = f"""You are the {JUDGE_MARK}. You read one memory about a person, \
written in Chinese. Write in Chinese the question this memory answers about that person, \
asked about how things are now (what the memory leaves true, not the event or when it \
happened), and the memory's answer to it in a few Chinese words. Ask with 什么, 哪里, 谁 \
or 多少, not a yes-or-no question.

Examples:
Memory: 小王最喜欢的乐队是五月天 -> {{"question": "小王最喜欢的乐队是什么？", \
"answer": "五月天"}}
Memory: 用户换成了站立式办公桌 -> {{"question": "用户用什么样的办公桌？", \
"answer": "站立式办公桌"}}
Memory: 用户的女儿开始在苏州上学 -> {{"question": "用户的女儿在哪里上学？", "answer": "苏州"}}
Memory: 用户辞掉了教师的工作，开始做翻译 -> {{"question": "用户做什么工作？", \
"answer": "翻译"}}

Answer with JSON only: {{"question": "...", "answer": "..."}}"""
"""The same for a memory in Chinese: a small model asked in English about a
Chinese memory puts its question and often its answer in English ("What city
does the user live in?" / "Shanghai"), which the Chinese memory it is then read
from does not answer."""

READ_PROMPT = f"""You are the {JUDGE_MARK}. Answer the question using only the memory, \
in a few words. If the memory does not answer it, reply exactly: not said"""

STILL_TRUE_PROMPT = f"""You are the {JUDGE_MARK}. You read one memory about a person \
and one statement. Using only the memory, is the statement still true? Reply exactly \
one of: yes, no, not said. Reply "no" only when the memory says the statement has \
ended or stopped being true; reply "not said" when the memory is about something else."""

_MAX_FIELD = 300
"""Characters of a question or an answer kept; a longer one is no short answer."""


@dataclass(frozen=True, slots=True)
class FactQuestion:
    """The question a memory answers, and its answer."""

    question: str
    answer: str


def question_prompt(memory: str) -> str:
    """The question prompt for ``memory``'s language."""
    return QUESTION_PROMPT_CHINESE if lexicon_for(memory) is CHINESE else QUESTION_PROMPT


def question_request(memory: str) -> str:
    """The user message asking which question ``memory`` answers."""
    # Memory text is data to the judge as much as to the agent: escaped the same way.
    return f"Memory: {escape_memory(memory)}"


def read_request(memory: str, question: str) -> str:
    """The user message asking ``question`` of ``memory`` alone, without the
    question's words of time (:func:`timeless`)."""
    return f"Memory: {escape_memory(memory)}\nQuestion: {escape_memory(timeless(question))}"


_NOW_WORDS = re.compile(
    r"\s*\b(?:right now|now|currently|these days|nowadays|at the moment|at present|"
    r"any ?more|still)\b|(?<=\s)(?:current|new|present)\s+(?=\w)",
)
_NOW_CHINESE = re.compile(r"现在|目前|如今|当前")
"""The same in Chinese, which writes no space around them."""


def timeless(question: str) -> str:
    """``question`` without its words of time ("now", "currently", "the user's new ...").

    The question comes from the newer memory and is read from an older one,
    which never says "now": "What is the user's favourite food now?" read
    from "User's favourite food is sushi" is "not said" to a small model,
    while the same question without "now" is "sushi".
    """
    cleaned = _NOW_CHINESE.sub("", _NOW_WORDS.sub(" ", question))
    cleaned = re.sub(r"\s+([?.,!])", r"\1", " ".join(cleaned.split()))
    return cleaned or question


def still_true_request(memory: str, statement: str) -> str:
    """The user message asking whether ``memory`` leaves ``statement`` true."""
    return f"Memory: {escape_memory(memory)}\nStatement: {escape_memory(statement)}"


_NO = re.compile(r"^(?:no|否|不是|不对)(?![\w'])", re.I)


def says_no(reading: str) -> bool:
    """Whether a reading of :data:`STILL_TRUE_PROMPT` is "no" (not "not said")."""
    return bool(_NO.match(parse_reading(reading)))


_YES_OR_NO = re.compile(r"^(?:yes|no|是的?|不是|否|对|不对|不|有|没有)[.!。！]?$", re.I)


def asks_yes_or_no(asked: FactQuestion) -> bool:
    """Whether ``asked`` only asks whether its memory holds ("用户在北京工作吗？" /
    "是"): its answer is a bare yes or no, not a value."""
    return bool(_YES_OR_NO.match(asked.answer.strip()))


def parse_question(answer: str) -> FactQuestion | None:
    """The question and answer in the model's reply, or ``None`` when it has none.

    The JSON may come in a code fence or with words around it; a reply with
    two objects, or without a non-empty ``question`` and ``answer``, is ``None``.
    """
    data = find_json_object(answer)
    if data is None:
        return None
    question, reply = data.get("question"), data.get("answer")
    if not isinstance(question, str) or not isinstance(reply, str | int | float):
        return None
    question, reply = _one_line(question), _one_line(str(reply))
    if not question or not reply:
        return None
    return FactQuestion(question, reply)


def parse_reading(answer: str) -> str:
    """The reading's answer on one line: its first line, without quotes or a label."""
    text = _FENCE.sub("", answer).strip()
    first = text.splitlines()[0] if text else ""
    first = _LABEL.sub("", first).strip().strip("\"'`").strip()
    return _one_line(first)


_FENCE = re.compile(r"```[A-Za-z]*")
_LABEL = re.compile(r"^(answer|reply|a)\s*[:\-]\s*", re.I)
_NOT_SAID = re.compile(
    r"^(not said|not stated|not mentioned|not specified|not given|unknown|none|n/?a|"
    r"no information|the memory does not (say|answer|mention)|it is not said)\b",
    re.I,
)


_CANNOT_TELL = re.compile(
    r"\b(?:does not|doesn't|did not|didn't|cannot|can't) (?:say|mention|specify|state|tell|"
    r"be determined)\b|\bnot (?:clear|specified|mentioned|stated)\b|\bunclear\b"
    r"|不明确|不清楚|没有提到|没提到|未提及|没有说|没说|未说明|无法确定|不确定",
    re.I,
)
"""A reading that says, in a sentence, that the memory cannot tell ("The user did
not say anything about their hair.", "……因此在医院做什么不明确。")."""


def is_not_said(reading: str) -> bool:
    """Whether a reading says the memory does not answer the question."""
    text = reading.strip().strip(".").strip()
    return not text or bool(_NOT_SAID.match(text) or _CANNOT_TELL.search(text))


def _one_line(text: str) -> str:
    return " ".join(text.split())[:_MAX_FIELD]
