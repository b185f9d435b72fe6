"""Four sessions, one memory: what the user says shapes later sessions, and a
newer fact ("I moved to Beijing") supersedes an older one ("I live in Hangzhou").

    python demos/oss_demo.py [static_control|agent_control|both] [--folder DIR] [--user ID]

The default mode is ``both``, the middleware's default (``MODE`` in the
environment works too). Memories are stored for user ``alice`` in the data
folder (``$AGENTSCOPE_MEM0_DIR`` or ``~/.agentscope-mem0`` unless ``--folder``
names another), replacing that user's earlier memories there; afterwards
``agentscope-mem0 list --user alice`` shows the current ones (``--all`` the
superseded ones too). See ``agentscope_mem0.demo``
for the choice of chat model (DashScope, an OpenAI-compatible endpoint, or the
offline scripted one).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os

MODES = ("static_control", "agent_control", "both")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The demo's command line."""
    parser = argparse.ArgumentParser(
        description="Four sessions: session 2 uses what session 1 was told; session 3's "
        "move to Beijing supersedes Hangzhou, and session 4 uses Beijing.",
        epilog="Chat model: DASHSCOPE_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL pick a "
        "real one; otherwise an offline scripted model answers (memory is real either way).",
    )
    parser.add_argument(
        "mode",
        nargs="?",
        choices=MODES,
        default=os.environ.get("MODE", "both"),
        help="how the agent uses memory (default: both, the middleware's default)",
    )
    parser.add_argument(
        "--folder",
        default=None,
        help="data folder (default: $AGENTSCOPE_MEM0_DIR or ~/.agentscope-mem0, "
        "the folder the agentscope-mem0 command reads)",
    )
    parser.add_argument(
        "--user", default="alice", help="whose memories (replaced by the demo; default: alice)"
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    """Run the demo."""
    args = parse_args(argv)
    logging.basicConfig(level=logging.ERROR)
    from agentscope_mem0.demo import run_demo

    asyncio.run(run_demo(args.mode, folder=args.folder, user_id=args.user))


if __name__ == "__main__":
    main()
