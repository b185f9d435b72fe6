"""StringContentFormatter: the OpenAI chat format with plain-string contents, which
llama-cpp-python's server needs (it answers AgentScope's lists of parts with HTTP 500)."""

from __future__ import annotations

from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import (
    AssistantMsg,
    Base64Source,
    DataBlock,
    HintBlock,
    SystemMsg,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    UserMsg,
)

from agentscope_mem0 import StringContentFormatter

MESSAGES = [
    SystemMsg(name="system", content="You help."),
    UserMsg(name="user", content=[TextBlock(text="Where do I live?"), TextBlock(text="Briefly.")]),
    AssistantMsg(name="memory", content=[HintBlock(hint="## Memories\n- User lives in Rome")]),
    AssistantMsg(
        name="assistant",
        content=[
            ToolCallBlock(id="c1", name="search_memory", input='{"keywords": ["home"]}'),
            ToolResultBlock(id="c1", name="search_memory", output="User lives in Rome"),
        ],
    ),
    AssistantMsg(name="assistant", content="You live in Rome."),
]


async def test_text_contents_are_strings() -> None:
    sent = await StringContentFormatter().format(MESSAGES)
    assert all(isinstance(m.get("content"), str | None) for m in sent), sent
    assert sent[1]["content"] == "Where do I live?\nBriefly."
    assert sent[2] == {"role": "user", "content": "## Memories\n- User lives in Rome"}
    call = next(m for m in sent if m.get("tool_calls"))
    assert call["tool_calls"][0]["function"]["name"] == "search_memory"
    assert next(m for m in sent if m["role"] == "tool")["content"] == "User lives in Rome"
    # AgentScope's own formatter sends the same messages as lists of parts.
    own = await OpenAIChatFormatter().format(MESSAGES)
    assert isinstance(own[1]["content"], list)
    assert [m["role"] for m in own] == [m["role"] for m in sent]


async def test_a_message_with_an_image_keeps_its_parts() -> None:
    picture = DataBlock(source=Base64Source(data="aGk=", media_type="image/png"))
    sent = await StringContentFormatter().format(
        [UserMsg(name="user", content=[TextBlock(text="What is this?"), picture])]
    )
    parts = sent[0]["content"]
    assert isinstance(parts, list) and [p["type"] for p in parts] == ["text", "image_url"]
