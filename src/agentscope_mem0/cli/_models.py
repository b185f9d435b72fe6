"""The AgentScope models a command embeds and extracts with, from their specs.

Embedder specs: ``default`` (the offline embedder of ``agentscope-mem0[local]``),
``hash`` or ``hash:<dims>`` (:class:`~agentscope_mem0.testing.HashEmbedding`, a
test hook: fast, offline, not semantic), or ``module:attr`` naming a model or a
function returning one. Chat specs: ``env`` (DashScope or an OpenAI-compatible
endpoint from the environment, else the offline rule-based extractor),
``offline``, or ``module:attr``.

mem0 needs both models to open a store, but most commands never call them:
those get stand-ins (:func:`inert_embedding_model`, :func:`inert_chat_model`)
that refuse every call, so ``list`` or ``status`` neither loads the offline
embedder nor needs the ``[local]`` extra.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._exceptions import ConfigurationError

if TYPE_CHECKING:
    from agentscope.embedding import EmbeddingModelBase
    from agentscope.model import ChatModelBase

__all__ = [
    "ChatChoice",
    "chat_model_from_spec",
    "embedder_size",
    "embedding_model_from_spec",
    "inert_chat_model",
    "inert_embedding_model",
]

OFFLINE_NOTE = (
    "the offline rule-based extractor (it keeps the user's first-person sentences); "
    "set DASHSCOPE_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL for a real model"
)


@dataclass(frozen=True)
class ChatChoice:
    """A chat model and a line saying which one it is."""

    model: ChatModelBase
    description: str


def _built(spec: str, what: str, base: type) -> Any:
    """The object ``module:attr`` names, called first when it is a factory."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(
            f"{what} {spec!r} is not a known name or a 'module:attribute' reference"
        )
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"cannot load {what} {spec!r}: {exc}") from exc
    if not isinstance(target, base) and callable(target):
        target = target()
    if not isinstance(target, base):
        raise ConfigurationError(
            f"{what} {spec!r} gave a {type(target).__name__}, not an agentscope {base.__name__}"
        )
    return target


def embedding_model_from_spec(spec: str) -> EmbeddingModelBase:
    """Build the embedding model a spec names.

    Raises:
        ConfigurationError: An unknown spec, or the default embedder is not
            installed.
    """
    from agentscope.embedding import EmbeddingModelBase

    name, _, arg = spec.partition(":")
    if spec == "default":
        from ..local import default_embedding_model

        model: EmbeddingModelBase = default_embedding_model()
        return model
    if name == "hash":
        from ..testing import HashEmbedding

        if arg and not arg.isdigit():
            raise ConfigurationError(f"embedder {spec!r}: use 'hash' or 'hash:<dimensions>'")
        return HashEmbedding(int(arg)) if arg else HashEmbedding()
    built: EmbeddingModelBase = _built(spec, "embedding model", EmbeddingModelBase)
    return built


def embedder_size(spec: str) -> tuple[int, str]:
    """The vector size and model name of the embedder a spec names; the
    default one is not loaded (nor needed) to tell."""
    if spec == "default":
        from ..local._e5 import E5_DIMENSIONS, E5_MODEL_NAME

        return E5_DIMENSIONS, E5_MODEL_NAME
    model = embedding_model_from_spec(spec)
    return model.dimensions, str(getattr(model, "model", type(model).__name__))


def inert_embedding_model(dimensions: int) -> EmbeddingModelBase:
    """A stand-in of the configured vector size for commands that never embed."""
    from ..testing import HashEmbedding

    class InertEmbedding(HashEmbedding):
        async def _call_api(self, inputs: list[Any], **kwargs: Any) -> Any:
            raise RuntimeError("this agentscope-mem0 command does not embed")

    return InertEmbedding(dimensions)


def chat_model_from_spec(spec: str) -> ChatChoice:
    """Build the extraction model a spec names.

    Raises:
        ConfigurationError: An unknown spec.
    """
    from agentscope.model import ChatModelBase

    from ..testing import ScriptedChatModel

    if spec == "offline":
        return ChatChoice(ScriptedChatModel("OK."), OFFLINE_NOTE)
    if spec == "env":
        from ..demo import chat_model_from_env

        model, description = chat_model_from_env()
        offline = isinstance(model, ScriptedChatModel)
        return ChatChoice(model, OFFLINE_NOTE if offline else description)
    model = _built(spec, "chat model", ChatModelBase)
    return ChatChoice(model, f"{type(model).__name__} {getattr(model, 'model', '')}".strip())


def _refuse(messages: Any, tools: Any) -> str:
    raise RuntimeError("this agentscope-mem0 command does not call a chat model")


def inert_chat_model() -> ChatModelBase:
    """A stand-in for commands that never extract."""
    from ..testing import ScriptedChatModel

    return ScriptedChatModel(_refuse, extractor=None, name="none")
