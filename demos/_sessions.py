"""What the real-model examples share: two sessions of one user, told and asked.

Session 1 tells a new agent where the user lives and how they like answers;
session 2 is another new agent, with an empty context, asked about it. The
memory between them is mem0's, extracted and embedded with the models given.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentscope.embedding import EmbeddingModelBase
    from agentscope.model import ChatModelBase

TOLD = "I live in Hangzhou, and I like answers as short bullet points."
ASKED = "Where do I live, and how should you format answers for me?"


def parse_args(name: str, description: str) -> argparse.Namespace:
    """``--folder`` and ``--user``; the default folder is named after the example."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--folder",
        type=Path,
        default=Path(tempfile.gettempdir()) / f"agentscope-mem0-{name}",
        help="data folder for this example's memories (default: %(default)s); one per "
        "embedding model, since a folder holds vectors of one size",
    )
    parser.add_argument("--user", default="alice", help="whose memories (default: alice)")
    return parser.parse_args()


def skip(reason: str) -> None:
    """Say why the example does not run here, and exit cleanly."""
    print(f"skipped: {reason}")
    raise SystemExit(0)


def env(name: str, default: str) -> str:
    """An environment variable, or ``default`` when unset or empty."""
    return os.environ.get(name) or default


async def two_sessions(
    chat_model: ChatModelBase,
    embedding_model: EmbeddingModelBase | None,
    *,
    folder: Path,
    user_id: str = "alice",
    **options: Any,
) -> tuple[str, str]:
    """Run both sessions on the embedded store in ``folder``; returns the two replies.

    ``embedding_model=None`` embeds offline (``agentscope-mem0[local]``);
    ``options`` go to ``Mem0Middleware.local``
    (``parameters=Mem0Middleware.Parameters(extraction="compact")``...).
    """
    from agentscope.agent import Agent
    from agentscope.message import UserMsg
    from agentscope.tool import Toolkit

    from agentscope_mem0 import Mem0Middleware

    print(f"memories of {user_id!r} go to {folder}")
    replies = []
    async with Mem0Middleware.local(
        user_id=user_id,
        chat_model=chat_model,
        embedding_model=embedding_model,
        folder=folder,
        **options,
    ) as mw:
        for session, text in ((1, TOLD), (2, ASKED)):
            agent = Agent(
                name="assistant",
                system_prompt="You are a helpful assistant.",
                model=chat_model,
                middlewares=[mw],
                toolkit=Toolkit(tools=await mw.list_tools()),
            )
            reply = await agent.reply(UserMsg("user", text))
            answer = reply.get_text_content() or ""
            print(f"\n[session {session}] user: {text}\n[session {session}] assistant: {answer}")
            replies.append(answer)
            # Store session 1's memories before session 2 asks for them.
            await mw.flush()
    return replies[0], replies[1]
