"""The AgentScope models a command embeds and extracts with, from their specs.

Embedder specs: ``default`` (the offline embedder of ``agentscope-mem0[local]``),
``hash`` or ``hash:<dims>`` (:class:`~agentscope_mem0.testing.HashEmbedding`, a
test hook: fast, offline, not semantic), or ``module:attr`` naming a model or a
function returning one. Chat specs: ``env`` (DashScope or an OpenAI-compatible
endpoint from the environment, else the offline rule-based extractor),
``offline``, or ``module:attr``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .._exceptions import ConfigurationError

if TYPE_CHECKING:
    from agentscope.embedding import EmbeddingModelBase
    from agentscope.model import ChatModelBase

__all__ = ["ChatChoice", "chat_model_from_spec", "embedding_model_from_spec", "inert_chat_model"]

OFFLINE_NOTE = (
    "the offline rule-based extractor (it keeps the user's first-person sentences); "
    "set DASHSCOPE_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL for a real model"
)


@dataclass(frozen=True)
class ChatChoice:
    """A chat model and a line saying which one it is."""

    model: ChatModelBase
    description: str
    offline: bool


def _import_object(spec: str, what: str) -> Any:
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
    return target


def _built(spec: str, what: str, base: type) -> Any:
    target = _import_object(spec, what)
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
        try:
            from ..local._embedder import default_embedding_model
        except ModuleNotFoundError as exc:
            raise ConfigurationError(
                f"the default offline embedder is unavailable ({exc}); install "
                "agentscope-mem0[local], or name the embedder your application uses "
                "with embedding_model = 'module:attr' in the config file (or "
                "$AGENTSCOPE_MEM0_EMBEDDER)"
            ) from exc
        model: EmbeddingModelBase = default_embedding_model()
        return model
    if name == "hash":
        from ..testing import HashEmbedding

        if arg and not arg.isdigit():
            raise ConfigurationError(f"embedder {spec!r}: use 'hash' or 'hash:<dimensions>'")
        return HashEmbedding(int(arg)) if arg else HashEmbedding()
    built: EmbeddingModelBase = _built(spec, "embedding model", EmbeddingModelBase)
    return built


def chat_model_from_spec(spec: str) -> ChatChoice:
    """Build the extraction model a spec names.

    Raises:
        ConfigurationError: An unknown spec.
    """
    from agentscope.model import ChatModelBase

    from ..testing import ScriptedChatModel

    if spec == "offline":
        return ChatChoice(ScriptedChatModel("OK."), OFFLINE_NOTE, True)
    if spec == "env":
        from ..demo import chat_model_from_env

        model, description = chat_model_from_env()
        if isinstance(model, ScriptedChatModel):
            return ChatChoice(model, OFFLINE_NOTE, True)
        return ChatChoice(model, description, False)
    model = _built(spec, "chat model", ChatModelBase)
    return ChatChoice(model, f"{type(model).__name__} {getattr(model, 'model', '')}".strip(), False)


def _refuse(messages: Any, tools: Any) -> str:
    raise RuntimeError("this agentscope-mem0 command does not call a chat model")


def inert_chat_model() -> ChatModelBase:
    """A stand-in for commands that never extract: mem0 needs an LLM to start."""
    from ..testing import ScriptedChatModel

    return ScriptedChatModel(_refuse, extractor=None, name="none")
