"""Offline stand-ins for the models, for tests (yours and ours) and the demo.

* :class:`ScriptedChatModel`: an AgentScope chat model whose answers come from
  a function; it recognises mem0's extraction prompt and answers it with
  mem0's JSON through :class:`RuleExtractor` unless told otherwise.
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

__all__ = [
    "HashEmbedding",
    "RuleExtractor",
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


def extraction_json(facts: Sequence[str]) -> str:
    """mem0's extraction answer storing ``facts``."""
    return json.dumps(
        {
            "memory": [
                {"id": str(i), "text": f, "attributed_to": "user"} for i, f in enumerate(facts)
            ]
        },
        ensure_ascii=False,
    )


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


class ScriptedChatModel(ChatModelBase):
    """A chat model that answers from a function instead of an API.

    Args:
        reply: ``reply(messages, tools) -> Reply`` for the agent's calls; a
            string or a list of strings (used in turn, the last one repeating)
            works too.
        extractor: Answers mem0's extraction prompts with these facts;
            ``None`` sends those prompts to ``reply`` as well.
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
            answer: Reply = extraction_json(self.extractor(new_messages_in(messages)))
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
