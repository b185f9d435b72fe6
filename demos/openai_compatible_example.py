"""Long-term memory with an OpenAI-compatible server: OpenAI itself, or Ollama,
vLLM, llama.cpp, LM Studio... for chat, extraction and embeddings.

    OPENAI_API_KEY=sk-... python demos/openai_compatible_example.py
    # Ollama (ollama pull qwen2.5 && ollama pull nomic-embed-text):
    OPENAI_BASE_URL=http://localhost:11434/v1 OPENAI_MODEL=qwen2.5 \\
      OPENAI_EMBEDDING_MODEL=nomic-embed-text OPENAI_EMBEDDING_DIMENSIONS=768 \\
      python demos/openai_compatible_example.py
    # llama.cpp / llama-cpp-python's server (chat only; embeddings offline):
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_MODEL=qwen \\
      OPENAI_EMBEDDING_MODEL=local python demos/openai_compatible_example.py
    # vLLM: OPENAI_BASE_URL=http://localhost:8000/v1 and the served model names

Environment: ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` (one is required;
without both the example says so and exits 0), ``OPENAI_MODEL`` (default
``gpt-4o-mini``), ``OPENAI_EMBEDDING_MODEL`` (default
``text-embedding-3-small``; ``local`` for this package's offline embedder,
for servers that serve no embeddings) and ``OPENAI_EMBEDDING_DIMENSIONS``
(default 1536; it must be what the embedding model returns),
``MEM0_EXTRACTION`` (``compact``, the default with a base URL: local models
have small contexts; ``mem0`` otherwise).

The chat model sends message contents as plain strings
(``StringContentFormatter``): llama-cpp-python's server refuses the lists of
parts AgentScope's own formatter sends (HTTP 500); OpenAI takes either.
"""

from __future__ import annotations

import asyncio
import os

from _sessions import env, parse_args, skip, two_sessions


def main() -> None:
    """Build the OpenAI-compatible models and run the two sessions."""
    args = parse_args("openai", __doc__.splitlines()[0])
    key = os.environ.get("OPENAI_API_KEY")
    base_url = os.environ.get("OPENAI_BASE_URL")
    if not key and not base_url:
        skip(
            "set OPENAI_API_KEY (OpenAI) or OPENAI_BASE_URL (Ollama, vLLM, ...) to run "
            "this example against an OpenAI-compatible server"
        )

    from agentscope.credential import OpenAICredential
    from agentscope.embedding import OpenAIEmbeddingModel
    from agentscope.model import OpenAIChatModel
    from pydantic import SecretStr

    from agentscope_mem0 import Mem0Middleware, StringContentFormatter

    # Local servers ignore the key but the client wants one.
    credential = OpenAICredential(api_key=SecretStr(key or "not-needed"), base_url=base_url)
    chat = OpenAIChatModel(
        credential,
        model=env("OPENAI_MODEL", "gpt-4o-mini"),
        stream=False,
        formatter=StringContentFormatter(),
    )
    embedding_name = env("OPENAI_EMBEDDING_MODEL", "text-embedding-3-small")
    embedding = None  # "local": the package's offline embedder
    if embedding_name != "local":
        embedding = OpenAIEmbeddingModel(
            credential,
            model=embedding_name,
            dimensions=int(env("OPENAI_EMBEDDING_DIMENSIONS", "1536")),
            # OpenAI can shorten its vectors; most compatible servers reject the parameter.
            pass_dimensions=base_url is None,
        )
    extraction = env("MEM0_EXTRACTION", "compact" if base_url else "mem0")
    print(f"chat model {chat.model}" + (f" at {base_url}" if base_url else ""))
    asyncio.run(
        two_sessions(
            chat,
            embedding,
            folder=args.folder,
            user_id=args.user,
            parameters=Mem0Middleware.Parameters(extraction=extraction),
        )
    )


if __name__ == "__main__":
    main()
