"""An OpenAI chat formatter for servers that take only string message contents.

AgentScope's ``OpenAIChatFormatter`` sends every message's content as a list
of parts (``[{"type": "text", "text": ...}]``), which OpenAI accepts but
llama-cpp-python's OpenAI-compatible server answers with HTTP 500. This
formatter sends the same messages with text-only contents joined into one
string; a message with an image or audio part keeps its list (such a server
could not read it either way).

    from agentscope.model import OpenAIChatModel
    from agentscope_mem0 import StringContentFormatter

    model = OpenAIChatModel(credential, model="qwen", stream=False,
                            formatter=StringContentFormatter())
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentscope.formatter import OpenAIChatFormatter

if TYPE_CHECKING:
    from agentscope.message import Msg

__all__ = ["StringContentFormatter", "strings_only"]


class StringContentFormatter(OpenAIChatFormatter):
    """``OpenAIChatFormatter`` whose text-only message contents are strings."""

    async def format(self, msgs: list[Msg]) -> list[dict[str, Any]]:
        """The OpenAI chat messages of ``msgs``, text-only contents as strings."""
        return strings_only(await super().format(msgs))


def strings_only(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each content made of text parts only joined into one string."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list) and all(
            isinstance(part, dict) and part.get("type") == "text" for part in content
        ):
            message = {**message, "content": "\n".join(str(p.get("text", "")) for p in content)}
        out.append(message)
    return out
