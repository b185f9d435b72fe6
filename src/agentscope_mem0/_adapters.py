"""mem0 ``LLMBase`` / ``EmbeddingBase`` implementations backed by AgentScope.

mem0 drives these synchronously from worker threads; every call goes through
the process-wide :mod:`._bridge`. :func:`build_mem0_config` wires them into a
``MemoryConfig`` and registers the ``"agentscope"`` provider with mem0's
factories without widening mem0's own provider whitelist.
"""

from __future__ import annotations

import json
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

from ._bridge import get_bridge
from ._exceptions import ConfigurationError, DimensionMismatchError

if TYPE_CHECKING:
    from agentscope.model import ChatResponse
    from mem0.configs.base import MemoryConfig

__all__ = [
    "PROVIDER",
    "AgentScopeEmbedding",
    "AgentScopeLLM",
    "build_mem0_config",
]

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
            raise ConfigurationError(
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
        msgs = to_agentscope_messages(messages)
        if not msgs:
            raise ValueError("mem0 sent no system, user or assistant message to the chat model")
        response = get_bridge().run(_final_response(self.model, msgs, tools), timeout=self.timeout)
        return flatten_response(response, with_tools=bool(tools))


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
    """

    timeout: float | None = 60.0
    """Seconds one embedding call may take before it is abandoned."""

    def __init__(self, config: BaseEmbedderConfig | dict[str, Any] | None = None) -> None:
        # mem0 2.2 hands EmbeddingBase a BaseEmbedderConfig, but users may pass
        # a dict as they do for LLMBase.
        if isinstance(config, dict):
            config = BaseEmbedderConfig(**config)
        super().__init__(config)
        model = self.config.model
        if not isinstance(model, EmbeddingModelBase):
            raise ConfigurationError(
                "AgentScopeEmbedding needs an agentscope EmbeddingModelBase as "
                f"config['model'], got {type(model).__name__}"
            )
        self.model: EmbeddingModelBase = model

    def embed(self, text: Any, memory_action: str | None = None) -> list[float]:
        """Embed one text (mem0 sometimes passes a list; the first vector wins)."""
        texts = [text] if isinstance(text, str) else [str(t) for t in text]
        return self._embed(texts, memory_action)[0]

    def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
        """Embed many texts in one model call."""
        if not texts:
            return []
        return self._embed(list(texts), memory_action)

    def _embed(self, texts: list[str], memory_action: str | None) -> list[list[float]]:
        kwargs: dict[str, Any] = {}
        if getattr(self.model, "accepts_memory_action", False):
            # Models that embed queries and passages differently (e5) learn
            # which one mem0 is asking for.
            kwargs["memory_action"] = memory_action
        response = get_bridge().run(self.model(texts, **kwargs), timeout=self.timeout)
        vectors = [list(map(float, v)) for v in response.embeddings]
        if len(vectors) != len(texts):
            raise RuntimeError(
                f"embedding model {self.model.model!r} returned {len(vectors)} "
                f"vectors for {len(texts)} texts"
            )
        return vectors


_registered = threading.Lock()
_config_classes: tuple[type, type] | None = None


def _agentscope_config_classes() -> tuple[type, type]:
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


def build_mem0_config(
    *,
    chat_model: ChatModelBase | None = None,
    embedding_model: EmbeddingModelBase | None = None,
    mem0_config: MemoryConfig | dict[str, Any] | None = None,
) -> MemoryConfig:
    """Build a mem0 ``MemoryConfig`` whose LLM and embedder are AgentScope models.

    Without ``mem0_config`` the vector store is the embedded default: a local
    Qdrant and a history database in the data folder (see
    :func:`agentscope_mem0.local.data_dir`), sized to the embedding model.
    With ``mem0_config`` only the ``llm`` and ``embedder`` slots of a copy are
    replaced; vector store, history database, reranker and the rest are kept.

    Args:
        chat_model: The model mem0 extracts memories with.
        embedding_model: The model mem0 embeds memories with.
        mem0_config: A ``MemoryConfig`` (or its dict form) to start from.

    Returns:
        The config, ready for ``mem0.AsyncMemory(config=...)``.

    Raises:
        ConfigurationError: A model is missing or has the wrong type.
        DimensionMismatchError: The embedding model's ``dimensions`` differ
            from the vector store's ``embedding_model_dims``.
    """
    from mem0.configs.base import MemoryConfig

    check_model_types(chat_model, embedding_model)
    llm_cls, embedder_cls = _agentscope_config_classes()

    if mem0_config is None:
        if chat_model is None or embedding_model is None:
            raise ConfigurationError(
                "build_mem0_config needs both chat_model and embedding_model "
                "when no mem0_config is given"
            )
        from .local import embedded_store_config

        config = MemoryConfig(**embedded_store_config(dims=embedding_model.dimensions))
    elif isinstance(mem0_config, dict):
        base = {
            k: v
            for k, v in mem0_config.items()
            if not (k == "llm" and chat_model) and not (k == "embedder" and embedding_model)
        }
        config = MemoryConfig(**base)
    elif isinstance(mem0_config, MemoryConfig):
        # Two levels of copy: the slots and the store's size are set below and
        # the caller's object must not change.
        store = mem0_config.vector_store
        config = mem0_config.model_copy(
            update={"vector_store": store.model_copy(update={"config": _copy(store.config)})}
        )
    else:
        raise ConfigurationError(
            f"mem0_config must be a mem0 MemoryConfig or a dict, got {type(mem0_config).__name__}"
        )

    if chat_model is not None:
        config.llm = llm_cls(provider=PROVIDER, config={"model": chat_model})
    if embedding_model is not None:
        config.embedder = embedder_cls(provider=PROVIDER, config={"model": embedding_model})
        check_dimensions(config, embedding_model.dimensions)
    if "history_db_path" not in config.model_fields_set:
        # mem0 would fall back to its global ~/.mem0; keep history in our folder.
        from .local import history_db_path
        from .local._folder import prepare_history_db

        config.history_db_path = str(history_db_path())
        prepare_history_db(config.history_db_path)
    from .local import share_local_qdrant

    return share_local_qdrant(config)


def _copy(value: Any) -> Any:
    return value.model_copy() if hasattr(value, "model_copy") else value


def check_model_types(chat_model: Any, embedding_model: Any) -> None:
    """Raise a clear error when a model given is not an AgentScope model of its kind."""
    if chat_model is not None and not isinstance(chat_model, ChatModelBase):
        raise ConfigurationError(
            f"chat_model must be an agentscope ChatModelBase, got {type(chat_model).__name__}"
        )
    if embedding_model is not None and not isinstance(embedding_model, EmbeddingModelBase):
        raise ConfigurationError(
            "embedding_model must be an agentscope EmbeddingModelBase, got "
            f"{type(embedding_model).__name__}"
        )


def check_dimensions(config: MemoryConfig, dims: int) -> None:
    """Make the vector store's size agree with the embedder's.

    An unset ``embedding_model_dims`` takes the embedder's size (mem0 2.2
    would otherwise silently assume 1536); a different explicit value is an
    error.
    """
    store = config.vector_store.config
    if store is None or not hasattr(store, "embedding_model_dims"):
        return
    explicit = "embedding_model_dims" in getattr(store, "model_fields_set", set())
    if not explicit:
        store.embedding_model_dims = dims
    elif store.embedding_model_dims != dims:
        raise DimensionMismatchError(
            f"the embedding model makes {dims}-dimensional vectors but the vector "
            f"store is configured for {store.embedding_model_dims}; set "
            f"vector_store.config.embedding_model_dims={dims} or use a matching "
            "embedding model (an existing collection must be recreated to change size)"
        )
