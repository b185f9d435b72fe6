"""Long-term memory with DashScope: Qwen for chat and extraction, DashScope's
text-embedding model for mem0's vectors.

    DASHSCOPE_API_KEY=sk-... python demos/dashscope_example.py [--folder DIR]

Environment: ``DASHSCOPE_API_KEY`` (required; without it the example says
so and exits 0), ``DASHSCOPE_MODEL`` (default ``qwen-plus``),
``DASHSCOPE_EMBEDDING_MODEL`` (default ``text-embedding-v4``) and
``DASHSCOPE_EMBEDDING_DIMENSIONS`` (default 1024).
"""

from __future__ import annotations

import asyncio
import os

from _sessions import env, parse_args, skip, two_sessions


def main() -> None:
    """Build the DashScope models and run the two sessions."""
    args = parse_args("dashscope", __doc__.splitlines()[0])
    key = os.environ.get("DASHSCOPE_API_KEY")
    if not key:
        skip("set DASHSCOPE_API_KEY to run this example against DashScope")

    from agentscope.credential import DashScopeCredential
    from agentscope.embedding import DashScopeEmbeddingModel
    from agentscope.model import DashScopeChatModel
    from pydantic import SecretStr

    credential = DashScopeCredential(api_key=SecretStr(key))
    chat = DashScopeChatModel(credential, model=env("DASHSCOPE_MODEL", "qwen-plus"), stream=False)
    embedding = DashScopeEmbeddingModel(
        credential,
        model=env("DASHSCOPE_EMBEDDING_MODEL", "text-embedding-v4"),
        dimensions=int(env("DASHSCOPE_EMBEDDING_DIMENSIONS", "1024")),
    )
    asyncio.run(two_sessions(chat, embedding, folder=args.folder, user_id=args.user))


if __name__ == "__main__":
    main()
