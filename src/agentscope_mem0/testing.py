"""Offline stand-ins for the models, for tests (yours and ours) and the demo.

* :class:`ScriptedChatModel`: an AgentScope chat model whose answers come from
  a function; it recognises mem0's extraction prompt and answers it with
  mem0's JSON through :class:`RuleExtractor` unless told otherwise.
* :class:`RuleJudge`: answers the package's time judgement (which older
  memories a new one updates or extends) for common patterns: "moved to",
  "switched to", "now prefers", "no longer", "changed jobs".
* :class:`HashEmbedding`: a deterministic bag-of-words embedding; texts that
  share words are close. No download, no network.

The memory side (mem0, the vector store, the history database) stays real.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import threading
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Any

from agentscope.credential import CredentialBase
from agentscope.embedding import EmbeddingModelBase, EmbeddingResponse
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock, ToolCallBlock
from agentscope.model import ChatModelBase, ChatResponse

from ._text.lexicon import ENGLISH

__all__ = [
    "HashEmbedding",
    "RuleExtractor",
    "RuleJudge",
    "ScriptedChatModel",
    "extraction_json",
    "is_extraction_request",
    "new_messages_in",
]

Reply = str | ChatResponse | Sequence[TextBlock | ToolCallBlock]
"""What a script may answer: text, a full response, or content blocks."""

_EXTRACTION_MARK = "Memory Extractor"


def _text_of(msg: Msg) -> str:
    return msg.get_text_content() or ""


def is_extraction_request(messages: Sequence[Msg]) -> bool:
    """Whether ``messages`` are mem0's fact-extraction prompt (mem0 2.2)."""
    return (
        bool(messages)
        and messages[0].role == "system"
        and _EXTRACTION_MARK in _text_of(messages[0])
    )


def new_messages_in(messages: Sequence[Msg]) -> list[tuple[str, str]]:
    """The ``(role, text)`` lines of the exchange mem0 asks to extract from."""
    prompt = "\n".join(_text_of(m) for m in messages if m.role == "user")
    match = re.search(r"## New Messages\n(.*?)(?:\n## |\Z)", prompt, re.S)
    if not match:
        return []
    lines = []
    for line in match.group(1).splitlines():
        role, sep, text = line.partition(": ")
        if sep and role in ("user", "assistant", "system"):
            lines.append((role, text.strip()))
        elif lines:
            lines[-1] = (lines[-1][0], f"{lines[-1][1]}\n{line}".strip())
    return lines


def extraction_json(facts: Sequence[str], *, event_dates: Sequence[str | None] = ()) -> str:
    """mem0's extraction answer storing ``facts`` (with their event dates, if given)."""
    items: list[dict[str, str]] = []
    for i, fact in enumerate(facts):
        item = {"id": str(i), "text": fact, "attributed_to": "user"}
        when = event_dates[i] if i < len(event_dates) else None
        if when:
            item["event_date"] = when
        items.append(item)
    return json.dumps({"memory": items}, ensure_ascii=False)


class RuleExtractor:
    """Keeps the user's first-person sentences as facts, a rough stand-in for an LLM.

    "I live in Hangzhou." becomes "User lives in Hangzhou."; sentences that do
    not talk about the user, and one-off requests ("Draw a chart of my sales"),
    are dropped, as a real extractor would. A request that states a standing
    preference ("... by default", "always ...") is kept.
    """

    _FIRST_PERSON = re.compile(r"\b(i|i'm|i've|my|me|mine|we|our)\b|我", re.I)
    _STATEMENT = re.compile(r"^(i|i'm|i've|my|we|our|mine)\b|我", re.I)
    _STANDING = re.compile(r"\b(by default|always|never|from now on|prefer|remember)\b", re.I)
    _POLITE = re.compile(r"^(please|kindly)\s+", re.I)
    _REWRITES = (
        (re.compile(r"^I am\b|^I'm\b", re.I), "User is"),
        (re.compile(r"^I live\b", re.I), "User lives"),
        (re.compile(r"^I like\b", re.I), "User likes"),
        (re.compile(r"^I prefer\b", re.I), "User prefers"),
        (re.compile(r"^I work\b", re.I), "User works"),
        (re.compile(r"^I have\b|^I've\b", re.I), "User has"),
        (re.compile(r"^I\b", re.I), "User"),
        (re.compile(r"^My\b", re.I), "User's"),
        (re.compile(r"^Make my\b", re.I), "User wants their"),
    )

    def __call__(self, exchange: Sequence[tuple[str, str]]) -> list[str]:
        """Facts from the user lines of ``exchange``."""
        facts: list[str] = []
        for role, text in exchange:
            if role != "user":
                continue
            for sentence in re.split(r"(?<=[.!?。！？])\s*", text):
                sentence = sentence.strip()
                sentence = self._POLITE.sub("", sentence)
                if len(sentence) < 4 or not self._FIRST_PERSON.search(sentence):
                    continue
                if not (self._STATEMENT.search(sentence) or self._STANDING.search(sentence)):
                    continue  # a one-off request, not a fact about the user
                for pattern, replacement in self._REWRITES:
                    if pattern.search(sentence):
                        sentence = pattern.sub(replacement, sentence, count=1)
                        break
                facts.append(sentence)
        return facts


# -- time ---------------------------------------------------------------------------


def is_judge_request(messages: Sequence[Msg]) -> bool:
    """Whether ``messages`` are this package's time-judgement prompt."""
    from ._write.judge_prompt import JUDGE_MARK

    return bool(messages) and messages[0].role == "system" and JUDGE_MARK in _text_of(messages[0])


_KINDS: dict[str, tuple[str, ...]] = {
    "home": ("live", "lives", "living", "moved", "move", "home", "apartment", "relocated"),
    "job": ("work", "works", "working", "job", "jobs", "employer", "company", "hired", "joined"),
    "preference": ("prefer", "prefers", "favorite", "favourite", "likes", "like", "love"),
    "relationship": ("partner", "girlfriend", "boyfriend", "married", "dating", "wife", "single"),
    "possession": ("owns", "own", "drives", "car", "bought", "sold", "has", "bike", "phone"),
    "plan": ("plan", "plans", "planning", "going", "trip", "intends", "cancelled", "canceled"),
}
_CHANGE = re.compile(
    r"\b(moved|relocated|switched|changed|now|no longer|not anymore|anymore|instead|"
    r"new job|left|quit|sold|broke up|cancel(?:l)?ed|gave up|stopped)\b",
    re.I,
)
_WORDS = re.compile(r"[a-z0-9']+")
_STOP = frozenset(
    "user user's own has the a an to of in at on and is are was for with now their his her".split()  # noqa: SIM905
)

_A_CHANGE = " (a change)"
"""What :class:`RuleJudge` adds to a question written for a memory that tells of a change."""

_SINGLE = ("home", "job")
"""Kinds a person has one of at a time: a change updates any earlier one."""


def _content_words(text: str) -> set[str]:
    words = set(_WORDS.findall(text.lower())) - _STOP
    return {w[:-1] if len(w) > 3 and w.endswith("s") else w for w in words}


def _kind(text: str) -> str | None:
    words = set(_WORDS.findall(text.lower()))
    for kind, marks in _KINDS.items():
        if words & set(marks):
            return kind
    return None


class RuleJudge:
    """Answers the time judgement's reading questions from patterns, a rough
    stand-in for an LLM.

    The judgement asks which question a memory answers, then asks that
    question of another memory. This judge names the kind of thing a memory
    is about (home, job, preference, relationship, possession, plan) and
    answers a question about a memory of the same kind as a model would
    for the usual cases: a change ("moved to", "switched to", "now
    prefers", "no longer", "changed jobs") gets the other memory's own
    words, about a home or a job (one at a time) or with a word in common
    ("prefers", "car", "partner"), so "now prefers matcha" leaves "likes
    hiking" alone; two memories without a change that share two content
    words get the shared words (a detail added); the same change said twice
    gets the same answer. Anything else is "not said".
    """

    def __call__(self, prompt: str) -> str:
        """The answer to one judgement message."""
        if "\nStatement: " in prompt:
            return "not said"  # whether a statement still holds: left to a real model
        memory, reading, question = prompt.partition("\nQuestion: ")
        memory = memory.removeprefix("Memory: ").strip()
        if not reading:
            # The question quotes its memory, so the reading knows what was asked.
            # Whether it tells of a change is said apart: the judgement reads the
            # question without its words of time, "now" in the quote included.
            kind = _kind(memory) or "fact"
            change = _A_CHANGE if _CHANGE.search(memory) else ""
            asked = f'What does the user say about their {kind}{change}, as in "{memory}"?'
            return json.dumps({"question": asked, "answer": " ".join(_words_of(memory))})
        quoted = re.search(r'as in "(.*)"\?\s*$', question, re.S)
        if quoted is None:
            return "not said"
        return self._read(memory, quoted.group(1), _A_CHANGE + ", as in" in question)

    @staticmethod
    def _read(memory: str, source: str, source_changes: bool) -> str:
        """``memory``'s answer to the question ``source`` answers (``source_changes``:
        the memory that question was written for tells of a change)."""
        kind = _kind(source)
        if kind is None or _kind(memory) != kind:
            return "not said"
        if memory.strip() == source.strip():
            return " ".join(_words_of(source))  # the same memory
        mine, theirs = _content_words(source), _content_words(memory)
        shared = mine & theirs
        source_changes = source_changes or bool(_CHANGE.search(source))
        changed = source_changes or bool(_CHANGE.search(memory))
        both = source_changes and _CHANGE.search(memory)
        if both and (theirs <= mine or mine <= theirs):
            return " ".join(_words_of(source))  # the same change said again
        if changed and (kind in _SINGLE or shared):
            return " ".join(_words_of(memory))
        if not changed and len(shared) >= 2:
            return " ".join(sorted(shared))
        return "not said"


def _words_of(text: str) -> list[str]:
    return sorted(_content_words(text))


_OBSERVED = re.compile(r"## Observation Date\n(\d{4}-\d{2}-\d{2})")


def _event_dates(messages: Sequence[Msg], facts: Sequence[str]) -> list[str | None]:
    """Event dates of ``facts`` when the prompt asks for them (see ``_time``)."""
    prompt = "\n".join(_text_of(m) for m in messages if m.role == "user")
    match = _OBSERVED.search(prompt)
    asked = "## Event Dates" in prompt or '"event_date"' in _text_of(messages[0])
    if not asked or match is None:
        return []
    import datetime as dt

    observed = dt.date.fromisoformat(match.group(1))
    return [event_date_in(fact, observed) for fact in facts]


def event_date_in(text: str, observed: Any) -> str | None:
    """The date ``text`` gives for its event, resolved against the date ``observed``."""
    import datetime as dt

    low = text.lower()
    if m := re.search(r"\b(\d{4}-\d{2}-\d{2})\b", low):
        return m.group(1)
    if m := re.search(r"\bin (" + "|".join(ENGLISH.months) + r")(?: (\d{4}))?\b", low):
        year = int(m.group(2)) if m.group(2) else observed.year
        return f"{year:04d}-{ENGLISH.months.index(m.group(1)) + 1:02d}"
    if m := re.search(r"\b(?:in|since) (\d{4})\b", low):
        return m.group(1)
    if "yesterday" in low:
        return (observed - dt.timedelta(days=1)).isoformat()
    if "last week" in low:
        return (observed - dt.timedelta(days=7)).isoformat()
    if "last month" in low:
        first = observed.replace(day=1) - dt.timedelta(days=1)
        return f"{first.year:04d}-{first.month:02d}"
    if "last year" in low:
        return str(observed.year - 1)
    if "next month" in low:
        nxt = (observed.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
        return f"{nxt.year:04d}-{nxt.month:02d}"
    if m := re.search(r"\bnext (" + "|".join(ENGLISH.weekdays) + r")\b", low):
        ahead = (ENGLISH.weekdays.index(m.group(1)) - observed.weekday()) % 7 or 7
        return (observed + dt.timedelta(days=ahead)).isoformat()
    return None


class ScriptedChatModel(ChatModelBase):
    """A chat model that answers from a function instead of an API.

    Args:
        reply: ``reply(messages, tools) -> Reply`` for the agent's calls; a
            string or a list of strings (used in turn, the last one repeating)
            works too.
        extractor: Answers mem0's extraction prompts with these facts;
            ``None`` sends those prompts to ``reply`` as well. When the prompt
            asks for event dates, dates the text gives ("in 2019", "last
            month") are resolved against its observation date.
        judge: Answers the time judgement; ``None`` sends it to ``reply``.
        delay: Seconds each call takes (to model a slow provider).
        stream: Answer as a stream of chunks, as most providers do.
    """

    def __init__(
        self,
        reply: Callable[[list[Msg], list[dict[str, Any]] | None], Reply]
        | str
        | Sequence[str] = "OK.",
        *,
        extractor: Callable[[Sequence[tuple[str, str]]], list[str]] | None = RuleExtractor(),  # noqa: B008
        judge: Callable[[str], str] | None = RuleJudge(),  # noqa: B008
        delay: float = 0.0,
        stream: bool = False,
        name: str = "scripted",
    ) -> None:
        super().__init__(
            credential=CredentialBase(),
            model=name,
            parameters=ChatModelBase.Parameters(),
            stream=stream,
            max_retries=0,
        )
        self.formatter = OpenAIChatFormatter()
        self._reply = reply
        self._turn = 0
        self.extractor = extractor
        self.judge = judge
        self.judge_calls: list[list[Msg]] = []
        """Every time-judgement call's messages."""
        self.delay = delay
        self.calls: list[list[Msg]] = []
        """Every agent-side call's messages, in order (extraction calls excluded)."""
        self.extraction_calls: list[list[Msg]] = []
        """Every mem0 extraction call's messages."""
        self.loops: set[int] = set()
        """Ids of the event loops the model was called on."""
        self._lock = threading.Lock()

    def _script(self, messages: list[Msg], tools: list[dict[str, Any]] | None) -> Reply:
        if callable(self._reply):
            return self._reply(messages, tools)
        if isinstance(self._reply, str):
            return self._reply
        replies = list(self._reply)
        with self._lock:
            index = min(self._turn, len(replies) - 1)
            self._turn += 1
        return replies[index]

    async def _call_api(
        self,
        model_name: str,
        messages: list[Msg],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> ChatResponse | AsyncGenerator[ChatResponse, None]:
        self.loops.add(id(asyncio.get_running_loop()))
        if self.delay:
            await asyncio.sleep(self.delay)
        if self.extractor is not None and is_extraction_request(messages):
            with self._lock:
                self.extraction_calls.append(list(messages))
            facts = self.extractor(new_messages_in(messages))
            answer: Reply = extraction_json(facts, event_dates=_event_dates(messages, facts))
        elif self.judge is not None and is_judge_request(messages):
            with self._lock:
                self.judge_calls.append(list(messages))
            answer = self.judge(_text_of(messages[-1]))
        else:
            with self._lock:
                self.calls.append(list(messages))
            answer = self._script(messages, tools)
        response = _as_response(answer)
        if not self.stream:
            return response
        return _stream(response)


def _as_response(answer: Reply) -> ChatResponse:
    if isinstance(answer, ChatResponse):
        return answer
    if isinstance(answer, str):
        return ChatResponse(content=[TextBlock(text=answer)], is_last=True)
    return ChatResponse(content=list(answer), is_last=True)


async def _stream(response: ChatResponse) -> AsyncGenerator[ChatResponse, None]:
    text = "".join(b.text for b in response.content if isinstance(b, TextBlock))
    half = len(text) // 2
    if text:
        yield ChatResponse(content=[TextBlock(text=text[:half])], is_last=False, id=response.id)
        yield ChatResponse(content=[TextBlock(text=text[half:])], is_last=False, id=response.id)
    yield response


_TOKEN = re.compile(r"[a-z0-9]+|[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]", re.I)


class HashEmbedding(EmbeddingModelBase):
    """Deterministic bag-of-words vectors: shared words mean nearby vectors.

    Like real sentence embedders, any two texts keep some similarity (cosine
    at least about 0.3), so mem0's default score threshold does not hide
    memories that share no word with the query; ranking follows word overlap.

    Args:
        dimensions: Vector size.
        delay: Seconds each call takes.
    """

    def __init__(self, dimensions: int = 256, *, delay: float = 0.0) -> None:
        super().__init__(
            credential=CredentialBase(),
            model="hash-embedding",
            dimensions=dimensions,
            parameters=None,
            context_size=8192,
            batch_size=256,
            max_retries=0,
            retry_delay=0.0,
        )
        self.delay = delay
        self.texts_embedded = 0

    def vector(self, text: str) -> list[float]:
        """The embedding of one text."""
        vec = [0.0] * self.dimensions
        for token in _TOKEN.findall(text.lower()):
            if len(token) > 3 and token.endswith("s"):
                token = token[:-1]
            digest = hashlib.blake2b(token.encode(), digest_size=8).digest()
            index = 1 + int.from_bytes(digest[:4], "little") % (self.dimensions - 1)
            vec[index] += 1.0 if digest[4] & 1 else -1.0
        norm = math.sqrt(sum(v * v for v in vec)) or 1.0
        # Dimension 0 is a shared component; the words live in the others.
        return [0.8] + [0.6 * v / norm for v in vec[1:]]

    async def _call_api(self, inputs: list[Any], **kwargs: Any) -> EmbeddingResponse:
        if self.delay:
            await asyncio.sleep(self.delay)
        self.texts_embedded += len(inputs)
        return EmbeddingResponse(embeddings=[self.vector(str(t)) for t in inputs])
