"""``Mem0Middleware.Parameters``: the user-tunable options as one pydantic model.

AgentScope's RAG, ReMe and agentic-memory middlewares take a ``parameters``
model whose JSON schema the agent service renders as a configuration form;
this is ``Mem0Middleware``'s. Every field is a constructor keyword of the same
name and default; structural wiring (the client, models, folders, a shared
state) stays on the constructor. :func:`takes_parameters` lets the
constructor accept the model beside the flat keywords.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ._exceptions import ConfigurationError
from ._options import (
    DEFAULT_MAX_MEMORY_TOKENS,
    DEFAULT_PROFILE_TTL,
    DEFAULT_QUERY_CONTEXT_TURNS,
    FLAT_KEYWORDS,
)

__all__ = [
    "Mem0MiddlewareParameters",
    "expand_parameters",
    "keyword_defaults",
    "takes_parameters",
]

F = TypeVar("F", bound=Callable[..., Any])


class Mem0MiddlewareParameters(BaseModel):
    """User-tunable options of :class:`~agentscope_mem0.Mem0Middleware`.

    Each field is the constructor keyword of the same name, with the same
    default: ``Mem0Middleware(user_id=..., parameters=Mem0Middleware.Parameters(mode="both"))``
    is ``Mem0Middleware(user_id=..., mode="both")``.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["static_control", "agent_control", "both"] = Field(
        default="both",
        title="Memory Mode",
        description=(
            "`static_control`: search memory before each reply and put what is found "
            "in front of the model; store each exchange afterwards. `agent_control`: "
            "no automatic search or write; the agent gets `search_memory` and "
            "`add_memory` tools. `both`: the two together."
        ),
    )
    top_k: int = Field(
        default=5,
        ge=1,
        le=100,
        title="Top K",
        description="Most memories recalled per search.",
    )
    threshold: float | None = Field(
        default=None,
        title="Score Threshold",
        description="Minimum relevance score of a recalled memory. Empty: no minimum.",
    )
    scope_search_by_agent: bool = Field(
        default=True,
        title="Search This Agent's Memories Only",
        description=(
            "Search only what this agent stored about the user; off, every agent's "
            "memories of the user."
        ),
    )
    recall: Literal["query", "profile", "full"] = Field(
        default="query",
        title="Recall",
        description=(
            "`query`: memories found by searching with the user's message. `profile`: "
            "the user's most recent memories, whatever the message. `full`: both."
        ),
    )
    query_context_turns: int = Field(
        default=DEFAULT_QUERY_CONTEXT_TURNS,
        ge=0,
        le=20,
        title="Earlier Messages in the Query",
        description="Earlier messages added to the search query (0 measured best).",
    )
    profile_ttl: float = Field(
        default=DEFAULT_PROFILE_TTL,
        ge=0,
        title="Profile Cache Seconds",
        description="Seconds a user's profile (recall `profile`/`full`) is reused.",
    )
    max_memory_tokens: int | None = Field(
        default=DEFAULT_MAX_MEMORY_TOKENS,
        ge=1,
        title="Memory Note Token Budget",
        description="Most tokens of recalled memories put in front of the model. Empty: no cap.",
    )
    search_timeout: float | None = Field(
        default=2.0,
        gt=0,
        title="Search Timeout (s)",
        description="Seconds a search may take before the reply goes on without memories.",
    )
    await_write: bool = Field(
        default=False,
        title="Wait for Writes",
        description=(
            "Hold each reply until its exchange is stored; off, writes are stored in "
            "the background and the reply returns at once."
        ),
    )
    judge: bool = Field(
        default=True,
        title="Track Changes Over Time",
        description=(
            "After a write, mark which older memories the new ones supersede or "
            "extend, with the extraction model, so that outdated facts are not recalled."
        ),
    )
    extraction: Literal["mem0", "compact"] = Field(
        default="mem0",
        title="Extraction Prompt",
        description=(
            "`mem0`: mem0's own extraction prompt (about 8k tokens per write). "
            "`compact`: this package's, which fits a 4k context with the conversation: "
            "for small local models and fewer paid tokens."
        ),
    )
    working_memory: Literal["conversation", "user"] | None = Field(
        default=None,
        title="Working Memory",
        description=(
            "A scratchpad the agent keeps with `update_working_memory` and sees in "
            "full every turn: per `conversation`, per `user`, or empty for none."
        ),
    )

    def keywords(self) -> dict[str, Any]:
        """The constructor keywords of the fields that were set."""
        return {name: getattr(self, name) for name in self.model_fields_set}


def expand_parameters(
    parameters: Any, keywords: dict[str, Any], defaults: dict[str, Any]
) -> dict[str, Any]:
    """``keywords`` with the fields set in ``parameters`` added as keywords.

    Args:
        parameters: A :class:`Mem0MiddlewareParameters`.
        keywords: The keywords given on their own.
        defaults: The constructor's defaults: a keyword at its default does
            not clash with the same field in ``parameters``.

    Raises:
        TypeError: ``parameters`` is not the model.
        ConfigurationError: A field set in the model and also given on its own.
    """
    if not isinstance(parameters, Mem0MiddlewareParameters):
        raise TypeError(
            f"parameters must be a Mem0Middleware.Parameters, got {type(parameters).__name__}"
        )
    given = parameters.keywords()
    for name in given:
        if name in keywords and (name in FLAT_KEYWORDS or keywords[name] != defaults.get(name)):
            raise ConfigurationError(
                f"{name} was given both on its own and in parameters=; pass it in one place"
            )
    return {**keywords, **given}


def keyword_defaults(function: Callable[..., Any]) -> dict[str, Any]:
    """The default of each keyword of ``function`` that has one."""
    return {
        name: p.default
        for name, p in inspect.signature(function).parameters.items()
        if p.default is not inspect.Parameter.empty
    }


def takes_parameters(init: F) -> F:
    """Let ``Mem0Middleware.__init__`` take ``parameters=`` beside its keywords
    (see :func:`expand_parameters`); ``init`` declares ``parameters`` only to
    show it in its signature."""
    defaults = keyword_defaults(init)

    @functools.wraps(init)
    def wrapper(self: Any, *args: Any, parameters: Any = None, **kwargs: Any) -> Any:
        if parameters is not None:
            kwargs = expand_parameters(parameters, kwargs, defaults)
        return init(self, *args, **kwargs)

    return wrapper  # type: ignore[return-value]
