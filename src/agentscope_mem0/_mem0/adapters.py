"""mem0 ``LLMBase`` / ``EmbeddingBase`` implementations backed by AgentScope.

mem0 drives these synchronously from worker threads; every call goes through
the process-wide bridge (:mod:`.loops`). :func:`agentscope_config_classes` registers
the ``"agentscope"`` provider with mem0's factories without widening mem0's
own provider whitelist; :mod:`.clients` puts the adapters into a config.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import AsyncGenerator, Callable
from typing import TYPE_CHECKING, Any

from agentscope.embedding import EmbeddingModelBase
from agentscope.message import AssistantMsg, Msg, SystemMsg, UserMsg
from agentscope.model import ChatModelBase
from mem0.configs.embeddings.base import BaseEmbedderConfig
from mem0.configs.llms.base import BaseLlmConfig
from mem0.embeddings.base import EmbeddingBase
from mem0.llms.base import LLMBase

from .._exceptions import EmbedderBusyError, ModelTypeError
from .._observe.tracing import model_span
from .._text.exchange import users_words
from .._vectors.keywords_only import KEYWORDS_ONLY
from .call_context import current, record_call
from .extraction import prepare_extraction, read_extraction_answer
from .loops import run_model

if TYPE_CHECKING:
    from agentscope.model import ChatResponse

__all__ = [
    "PROVIDER",
    "AgentScopeEmbedding",
    "AgentScopeLLM",
    "agentscope_config_classes",
]

logger = logging.getLogger(__name__)

PROVIDER = "agentscope"
"""The provider name the adapters are registered under in mem0's factories."""


class AgentScopeLLM(LLMBase):
    """mem0 LLM whose calls go to an AgentScope ``ChatModelBase``.

    Put the model in the config: ``{"model": chat_model}``.
    """

    timeout: float | None = 120.0
    """Seconds one extraction call may take before it is abandoned."""

    def __init__(self, config: BaseLlmConfig | dict[str, Any] | None = None) -> None:
        super().__init__(config)
        model = self.config.model
        if not isinstance(model, ChatModelBase):
            raise ModelTypeError(
                "AgentScopeLLM needs an agentscope ChatModelBase as config['model'],"
                f" got {type(model).__name__}"
            )
        self.model: ChatModelBase = model

    def generate_response(
        self,
        messages: list[dict[str, Any]],
        response_format: Any | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str = "auto",
    ) -> str | dict[str, Any]:
        """Answer mem0's prompt with the AgentScope model.

        Returns:
            The reply text, or ``{"content", "tool_calls"}`` when ``tools`` were
            given.
        """
        messages = prepare_extraction(messages)  # the write's said date; compact
        msgs = to_agentscope_messages(messages)
        if not msgs:
            raise ValueError("mem0 sent no system, user or assistant message to the chat model")
        size = sum(len(str(m.get("content") or "")) for m in messages)
        with model_span(
            "extract", self.model, messages=len(messages), prompt_chars=size, tools=bool(tools)
        ) as span:
            response = run_model(_final_response(self.model, msgs, tools), timeout=self.timeout)
            answer = flatten_response(response, with_tools=bool(tools))
            text = answer if isinstance(answer, str) else str(answer.get("content") or "")
            prompt = "\n".join(str(m.get("content") or "") for m in messages)
            span.usage(record_call(response.usage, prompt, text))
            span.set(response_chars=len(text))
            span.set_text("response", text)
            json_mode = (
                isinstance(response_format, dict) and response_format.get("type") == "json_object"
            )
            checked = read_extraction_answer(answer, json_mode=json_mode, ask=self._ask)
            check = current().check
            if check is not None and check.grounding is not None:
                span.set(
                    memories_kept=check.kept,
                    memories_dropped=sum(check.dropped.values()),
                    **{f"memories_dropped_{k}": n for k, n in check.dropped.items()},
                )
        return checked

    def _ask(self, question: str) -> str:
        """One short question to the model (the check of an extraction's proposal)."""
        msgs = [UserMsg(name="user", content=question)]
        with model_span("check", self.model, messages=1, prompt_chars=len(question)) as span:
            response = run_model(_final_response(self.model, msgs, None), timeout=self.timeout)
            answer = flatten_response(response, with_tools=False)
            text = answer if isinstance(answer, str) else str(answer.get("content") or "")
            span.usage(record_call(response.usage, question, text))
        return text


def to_agentscope_messages(messages: list[dict[str, Any]]) -> list[Msg]:
    """Turn OpenAI-style message dicts into AgentScope messages.

    Roles other than system, user and assistant (tool results, say) are dropped.
    """
    builders: dict[str, Callable[..., Msg]] = {
        "system": SystemMsg,
        "user": UserMsg,
        "assistant": AssistantMsg,
    }
    out: list[Msg] = []
    for message in messages:
        build = builders.get(str(message.get("role")))
        if build is None:
            continue
        content = message.get("content") or ""
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        out.append(build(name=str(message.get("role")), content=content))
    return out


async def _final_response(
    model: ChatModelBase, messages: list[Msg], tools: list[dict[str, Any]] | None
) -> ChatResponse:
    result = await model(messages, tools=tools)
    if not isinstance(result, AsyncGenerator):
        return result
    last: ChatResponse | None = None
    async for chunk in result:
        last = chunk
    if last is None:
        raise RuntimeError(f"chat model {model.model!r} streamed no response")
    return last


def flatten_response(response: ChatResponse, *, with_tools: bool) -> str | dict[str, Any]:
    """Reduce a ``ChatResponse`` to the text (and tool calls) mem0 parses.

    Thinking blocks are left out: mem0 parses the text as JSON.
    """
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in response.content or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text or "")  # type: ignore[union-attr]
        elif kind == "tool_call":
            raw = block.input or "{}"  # type: ignore[union-attr]
            try:
                arguments: Any = json.loads(raw)
            except (TypeError, json.JSONDecodeError):
                arguments = raw
            calls.append({"name": block.name, "arguments": arguments})  # type: ignore[union-attr]
    text = "".join(texts)
    if with_tools:
        return {"content": text, "tool_calls": calls}
    return text


class AgentScopeEmbedding(EmbeddingBase):
    """mem0 embedder whose calls go to an AgentScope ``EmbeddingModelBase``.

    Put the model in the config: ``{"model": embedding_model}``.

    Two optional methods of the model are used when it has them:
    ``embed_blocking(texts, memory_action) -> list[list[float]]`` is called
    directly in mem0's worker thread instead of running the model's coroutine
    through the bridge (for models that compute in-process, like the offline
    e5), and ``warm()`` is called once at construction, so that loading the
    model does not fall on the first search. A model that sets
    ``accepts_background = True`` also gets ``background=True`` for the
    embeddings of mem0's writes, whatever their ``memory_action``: mem0 2.2's
    ``add`` embeds the exchange (the user's lines of it, :func:`users_words`)
    as a query (``"search"``) to find the memories it may repeat, and a model
    that queues its work (the offline e5) must not put that text ahead of a
    reply's search.

    With :attr:`keywords_when_busy` set (by the package, when the client's
    store can search by keywords alone), a model that has a ``query_budget``
    may refuse a reply's query; the search then gets
    :data:`~agentscope_mem0._vectors.keywords_only.KEYWORDS_ONLY` as its vector.
    """

    timeout: float | None = 60.0
    """Seconds one embedding call may take before it is abandoned."""

    keywords_when_busy = False
    """A reply's query the model refuses is searched by keywords alone."""

    keyword_only_queries = 0
    """Queries the model refused, searched by keywords alone."""

    def __init__(self, config: BaseEmbedderConfig | dict[str, Any] | None = None) -> None:
        # mem0 2.2 hands EmbeddingBase a BaseEmbedderConfig, but users may pass
        # a dict as they do for LLMBase.
        if isinstance(config, dict):
            config = BaseEmbedderConfig(**config)
        super().__init__(config)
        model = self.config.model
        if not isinstance(model, EmbeddingModelBase):
            raise ModelTypeError(
                "AgentScopeEmbedding needs an agentscope EmbeddingModelBase as "
                f"config['model'], got {type(model).__name__}"
            )
        self.model: EmbeddingModelBase = model
        warm = getattr(model, "warm", None)
        if callable(warm):
            warm()

    def embed(self, text: Any, memory_action: str | None = None) -> list[float]:
        """Embed one text (mem0 sometimes passes a list; the first vector wins)."""
        texts = [text] if isinstance(text, str) else [str(t) for t in text]
        if memory_action == "search":
            texts = [users_words(t) for t in texts]
        return self._embed(texts, memory_action)[0]

    def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
        """Embed many texts in one model call."""
        if not texts:
            return []
        return self._embed(list(texts), memory_action)

    def _embed(self, texts: list[str], memory_action: str | None) -> list[list[float]]:
        blocking = getattr(self.model, "embed_blocking", None)
        if callable(blocking):
            # A synchronous model (the offline e5) runs right here in mem0's
            # worker thread: no event loop, no second thread to wait for.
            extra: dict[str, Any] = {}
            if getattr(self.model, "accepts_background", False):
                extra["background"] = current().serves_no_reply
            if self._may_refuse(memory_action, extra):
                extra["may_refuse"] = True
            try:
                vectors = [list(map(float, v)) for v in blocking(texts, memory_action, **extra)]
            except EmbedderBusyError as exc:
                logger.debug("searching by keywords alone: %s", exc)
                self.keyword_only_queries += len(texts)
                return [KEYWORDS_ONLY for _ in texts]
        else:
            kwargs: dict[str, Any] = {}
            if getattr(self.model, "accepts_memory_action", False):
                # Models that embed queries and passages differently (e5) learn
                # which one mem0 is asking for.
                kwargs["memory_action"] = memory_action
            response = run_model(self.model(texts, **kwargs), timeout=self.timeout)
            vectors = [list(map(float, v)) for v in response.embeddings]
        if len(vectors) != len(texts):
            raise RuntimeError(
                f"embedding model {self.model.model!r} returned {len(vectors)} "
                f"vectors for {len(texts)} texts"
            )
        return vectors

    def _may_refuse(self, memory_action: str | None, extra: dict[str, Any]) -> bool:
        return (
            self.keywords_when_busy
            and memory_action == "search"
            and current().serves_a_reply  # not a write's, nor a command's
            and not extra.get("background", False)
            and getattr(self.model, "query_budget", None) is not None
        )


_registered = threading.Lock()
_config_classes: tuple[type, type] | None = None


def agentscope_config_classes() -> tuple[type, type]:
    """``LlmConfig`` / ``EmbedderConfig`` subclasses that accept only our provider.

    mem0's own classes keep their whitelist: a ``MemoryConfig`` built without
    this helper and naming ``"agentscope"`` is still rejected.
    """
    global _config_classes
    with _registered:
        if _config_classes is not None:
            return _config_classes
        from mem0.embeddings.configs import EmbedderConfig
        from mem0.llms.configs import LlmConfig
        from mem0.utils.factory import EmbedderFactory, LlmFactory
        from pydantic import field_validator

        def only_ours(kind: str) -> Any:
            def validate_config(cls: type, v: Any, info: Any) -> Any:
                provider = info.data.get("provider")
                if provider != PROVIDER:
                    raise ValueError(f"Unsupported {kind} provider: {provider}")
                return v

            return field_validator("config")(classmethod(validate_config))

        class AgentScopeLlmConfig(LlmConfig):
            validate_config = only_ours("LLM")

        class AgentScopeEmbedderConfig(EmbedderConfig):
            validate_config = only_ours("embedding")

        LlmFactory.provider_to_class[PROVIDER] = (
            f"{__name__}.AgentScopeLLM",
            BaseLlmConfig,
        )
        EmbedderFactory.provider_to_class[PROVIDER] = f"{__name__}.AgentScopeEmbedding"
        _config_classes = (AgentScopeLlmConfig, AgentScopeEmbedderConfig)
        return _config_classes
