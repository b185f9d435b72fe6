"""Two sessions, one memory: run ``python demos/oss_demo.py [static_control|agent_control|both]``.

``MODE`` in the environment works too. See ``agentscope_mem0.demo`` for the
choice of chat model (DashScope, an OpenAI-compatible endpoint, or offline).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys

from agentscope_mem0.demo import run_demo

if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)
    mode = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("MODE", "static_control")
    asyncio.run(run_demo(mode))  # type: ignore[arg-type]
