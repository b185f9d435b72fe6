"""``demo``: the four-session demo on the embedded store."""

from __future__ import annotations

import asyncio

import click

from .._modes import MODES

__all__ = ["demo"]


@click.command(
    context_settings={"help_option_names": ["-h", "--help"]},
    epilog="Chat model: DASHSCOPE_API_KEY, OPENAI_API_KEY or OPENAI_BASE_URL pick a real "
    "one; otherwise an offline scripted model answers (the memory is real either way).",
)
@click.option(
    "--mode",
    type=click.Choice(list(MODES)),
    envvar="MODE",
    default="both",
    show_default=True,
    help="How the agent uses memory (the middleware's default is both).",
)
@click.option(
    "--folder",
    type=click.Path(file_okay=False),
    default=None,
    help="Data folder (default: $AGENTSCOPE_MEM0_DIR or ~/.agentscope-mem0).",
)
@click.option(
    "--user",
    "-u",
    default="demo-user",  # agentscope_mem0.demo.DEMO_USER, without importing AgentScope
    show_default=True,
    help="Whose memories the demo writes: its own user by default (that user's earlier "
    "memories are replaced; no other user's are touched).",
)
def demo(mode: str, folder: str | None, user: str) -> None:
    """Four sessions: later ones use what was told, and a move supersedes the old home.

    Session 2 uses session 1's chart preference; session 3 says the user moved
    to Beijing, which supersedes "lives in Hangzhou", and session 4 uses Beijing.
    Stores under a user of its own, demo-user, replacing only that user's
    memories from an earlier run; afterwards `agentscope-mem0 list --user
    demo-user` shows what is remembered as true now (`--all` adds the
    superseded ones).
    """
    from ..demo import run_demo
    from ._exit_codes import translate_errors

    # A missing [local] extra (or a locked folder) exits 2 (3) with the fix,
    # not a traceback.
    with translate_errors():
        asyncio.run(run_demo(mode, folder=folder, user_id=user))  # type: ignore[arg-type]
