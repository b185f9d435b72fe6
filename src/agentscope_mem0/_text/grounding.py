"""Whether a memory the extraction proposes is grounded in what the user said.

An extraction model proposes memories; this module reads each proposal
against the exchange it came from and says whether the user's own words
support it, before it is stored. What it reads:

* **Whose words.** The user's side of the exchange grounds a memory; the
  assistant's reply does not (its answers, advice and claims about the user
  are not the user's), nor does anything else in the prompt.
* **Statements, not asks.** A user's question or request ("What's 17 times
  23?", "Write a story about a fisherman in Lisbon") tells nothing about the
  user; a memory that only restates one is not kept. "Remember that ..." is a
  statement.
* **Specifics.** A name or a number in the memory must be in the user's
  words (dates the extraction resolved against the day are allowed).
* **Language.** A memory is written in the language the user wrote in.

Words decide where they can (:func:`read_grounding` answers
``"grounded"``, or the reason to drop); where they cannot (``"unsure"``), the
caller asks the model one short question (:func:`grounding_question`).
Text in a script no lexicon reads is compared character by character.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from .lexicon import CHINESE, CJK_RUN, ENGLISH, WORD, Lexicon, fold

__all__ = [
    "DROP_REASONS",
    "Grounding",
    "GroundingReading",
    "content_words",
    "grounding_question",
    "read_answer",
    "read_grounding",
    "says",
    "specifics",
    "third_person",
    "writes_cjk",
]

GroundingReading = Literal[
    "grounded", "unsure", "assistant", "ungrounded", "question", "language", "ignored"
]
"""What is read of a proposed memory: kept (``grounded``), to be asked of the
model (``unsure``), or dropped for a reason (the others; ``ignored``: the model
found it under the user's "never remember" rules)."""

DROP_REASONS: tuple[GroundingReading, ...] = (
    "assistant",
    "ungrounded",
    "question",
    "language",
    "ignored",
)

KEEP_SHARE = 0.6
"""A memory whose content words are at least this share in the user's
statements is grounded by the words (chosen on the dev half of
benchmarks/data/grounding.jsonl, docs/benchmarks/real-model.md)."""

DROP_SHARE = 0.25
"""Below this share in the user's words, a memory is not the user's: the
assistant's when its words are the reply's, otherwise not said at all."""

_CLAUSE = re.compile(r"[^,;，；。！？!?.\n]+[,;，；。！？!?.]*")
_ASKED = re.compile(r"[?？]\s*$")
_DIGITS = re.compile(r"\d+(?:[.,]\d+)*")
_NAME = re.compile(r"(?<![\w'])([A-Z][\w'’-]*)")
_YEAR = re.compile(r"^(?:19|20)\d\d$")
# A memory whose subject is the assistant ("The assistant provided a joke", "助手推荐了...").
_ASSISTANT_SUBJECT = re.compile(
    r"^\W*(?:the\s+)?(?:assistant|ai|bot|chatbot)\b|^\W*(?:助手|助理|AI)", re.I
)
# Words that say a memory is about the user (with the lexicons' people).
_SELF = frozenset({"user", "user's", "users", "i", "i'm", "me", "my", "mine", "we", "our", "us"})
# Forms of "have" say nothing of whose fact it is ("User has asthma", "I have asthma").
_HAVE = frozenset({"have", "has", "had", "having", "'ve", "'d"})


@dataclass(frozen=True, slots=True)
class Grounding:
    """The words of one exchange a proposed memory is read against.

    Args:
        user: What the user said (the user messages of the write).
        assistant: What the assistant answered.
    """

    user: str
    assistant: str

    @property
    def cjk(self) -> bool:
        """Whether the user wrote in Chinese, Japanese or Korean."""
        return writes_cjk(self.user)


def writes_cjk(text: str) -> bool:
    """Whether most letters of ``text`` are Chinese, Japanese or Korean characters."""
    cjk = sum(len(run) for run in CJK_RUN.findall(text))
    latin = len(ENGLISH.letters.findall(text))
    return cjk > 0 and cjk >= latin / 3


def _lexicon(text: str) -> Lexicon:
    return CHINESE if writes_cjk(text) else ENGLISH


def content_words(text: str) -> set[str]:
    """The content words of ``text``: stems of words no lexicon calls filler,
    Chinese, Japanese and Korean characters one by one (but the function
    characters of the Chinese lexicon), and numbers."""
    folded = fold(text)
    out: set[str] = set()
    for word in WORD.findall(folded):
        if CJK_RUN.fullmatch(word):
            continue
        if word in ENGLISH.fillers or word in _HAVE:
            continue
        out.add(ENGLISH.numbers.get(word, ENGLISH.stem(word)))
    for run in CJK_RUN.findall(folded):
        out.update(CHINESE.numbers.get(char, char) for char in run if char not in CHINESE.fillers)
    return out


def _clauses(text: str) -> tuple[str, str]:
    """``text``'s statements and its asks (questions, requests), each joined."""
    stated, asked = [], []
    for clause in _CLAUSE.findall(text):
        lexicon = _lexicon(clause)
        if lexicon.remember.search(clause):
            stated.append(clause)
        elif _ASKED.search(clause) or lexicon.asks.match(clause.strip()):
            asked.append(clause)
        else:
            stated.append(clause)
    return " ".join(stated), " ".join(asked)


def specifics(memory: str) -> set[str]:
    """Names and numbers the memory states (folded); month and day names and
    years are left out: the extraction resolves "next March" against the day."""
    calendar = {*ENGLISH.months, *ENGLISH.weekdays, *ENGLISH.month_abbreviations}
    names = {
        fold(name).rstrip("'’s")
        for name in _NAME.findall(memory)
        if fold(name) not in ENGLISH.fillers and fold(name) not in calendar
    }
    numbers = {number for number in _DIGITS.findall(memory) if not _YEAR.match(number)}
    # A capital that opens the memory or follows "User's" opens a sentence.
    first = WORD.findall(fold(memory))[:1]
    return (names - set(first) - {"user", "user's"}) | numbers


def _about_the_user(memory: str) -> bool:
    """Whether ``memory`` names the user or someone in their life."""
    folded = fold(memory)
    if any(person in folded for person in CHINESE.people | CHINESE.user_words):
        return True
    words = {*WORD.findall(folded)}
    return bool(
        words & _SELF or {ENGLISH.stem(w) for w in words} & ENGLISH.people or words & ENGLISH.people
    )


def says(text: str, specific: str) -> bool:
    folded = fold(text)
    if specific.isdigit():
        words = {ENGLISH.numbers.get(w, w) for w in WORD.findall(folded)}
        return (
            specific in words
            or re.search(rf"(?<!\d){re.escape(specific)}(?!\d)", folded) is not None
        )
    return specific in folded


def read_grounding(memory: str, grounding: Grounding) -> GroundingReading:
    """What the words of the exchange say of ``memory``.

    Returns:
        ``"grounded"`` (the user's statements say it, of the user or someone
        in their life), ``"unsure"`` (ask the model), or why it is not the
        user's: ``"language"`` (not in the language the user wrote in),
        ``"question"`` (it restates the user's question or request),
        ``"assistant"`` (the reply's words, not the user's) or
        ``"ungrounded"`` (nobody said it).
    """
    if grounding.cjk != writes_cjk(memory) and (CJK_RUN.search(memory) or grounding.cjk):
        return "language"
    if _ASSISTANT_SUBJECT.search(memory):
        return "assistant"
    if _ASKED.search(memory.strip()):  # a proposal that asks states nothing
        return "question"
    content = content_words(memory)
    if not content:
        return "ungrounded"
    missing = [s for s in specifics(memory) if not says(grounding.user, s)]
    if missing:
        return "assistant" if all(says(grounding.assistant, s) for s in missing) else "ungrounded"
    stated_text, asked_text = _clauses(grounding.user)
    stated, asked = content_words(stated_text), content_words(asked_text)
    share = len(content & stated) / len(content)
    if share >= KEEP_SHARE:
        # The user's words, but about nobody ("Good morning!"): the model decides.
        return "grounded" if _about_the_user(memory) else "unsure"
    if len(content & (stated | asked)) / len(content) >= KEEP_SHARE:
        return "question"
    said_by_user = len(content & (stated | asked)) / len(content)
    replied = content & content_words(grounding.assistant)
    if said_by_user < DROP_SHARE:
        return (
            "assistant"
            if len(replied - stated - asked) / len(content) >= DROP_SHARE
            else "ungrounded"
        )
    # Mostly the reply's words that the user did not state (a reply echoing the greeting).
    return "assistant" if len(replied - stated) / len(content) >= KEEP_SHARE else "unsure"


_QUESTION = """Decide whether a proposed memory is a fact the user stated about themselves.

Answer NO when the proposal is a greeting or small talk, a question or request the user made \
(asking for code, a translation, a story, a calculation), general knowledge, or something only \
the assistant said. Answer YES only when the user's own words state it about the user or \
someone in their life.

Examples:
User wrote: Can you write a poem about autumn? / Proposal: User wants a poem about autumn. -> NO
User wrote: Hi there, how are you? / Proposal: Hi there, how are you? -> NO
User wrote: I moved to Oslo last year. / Proposal: User moved to Oslo last year. -> YES
User wrote: 帮我写一封请假邮件。 / Proposal: 写一封请假邮件。 -> NO
User wrote: 我女儿在学钢琴。 / Proposal: 用户的女儿在学钢琴。 -> YES
"""
"""The check's instructions, with examples in both languages the lexicons read
(none of them from the sets the check is measured on)."""


_FIRST_PERSON = [
    (re.compile(r"\bI(?:'m| am)\b"), "User is"),
    (re.compile(r"\bI(?:'ve| have)\b"), "User has"),
    (re.compile(r"\bI'd\b"), "User would"),
    (re.compile(r"\bI'll\b"), "User will"),
    (re.compile(r"\bI\b"), "User"),
    (re.compile(r"\b[Mm]y\b"), "User's"),
    (re.compile(r"\b[Mm]ine\b"), "User's"),
    (re.compile(r"\b(?<!^)me\b"), "User"),
    (re.compile(r"\b[Mm]yself\b"), "User"),
    (re.compile(r"我(?!们)"), "用户"),
]


def third_person(memory: str) -> str:
    """``memory`` about "User" where the extraction copied the user's first person
    ("I play the cello" -> "User play the cello", "我对花生过敏" -> "用户对花生过敏"):
    shown in a later prompt, "I" would read as the assistant."""
    for pattern, replacement in _FIRST_PERSON:
        memory = pattern.sub(replacement, memory)
    return memory


def grounding_question(memory: str, grounding: Grounding, guidance: str = "") -> str:
    """The one short question the model answers when the words cannot tell."""
    parts = [_QUESTION]
    if guidance:
        parts.append(
            f"The user's own rules (answer NO for what they say never to remember):\n"
            f"{guidance.strip()}\n"
        )
    parts.append(f"User wrote: {grounding.user.strip()}\nProposal: {memory.strip()}")
    parts.append("Answer YES or NO.")
    return "\n".join(parts)


def read_answer(answer: str) -> bool | None:
    """The model's YES (``True``) or NO (``False``); ``None`` when it said neither."""
    words = WORD.findall(fold(answer))[:3]
    if any(word in ("yes", "是", "是的", "对") for word in words):
        return True
    if any(word in ("no", "不", "否", "不是") for word in words):
        return False
    return None
