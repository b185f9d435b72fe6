"""``demo``: the two-session demo on the embedded store."""

from __future__ import annotations

import asyncio

import click

from .._modes import MODES

__all__ = ["demo"]


@click.command()
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
    default="alice",
    show_default=True,
    help="Whose memories the demo writes (its earlier memories are replaced).",
)
def demo(mode: str, folder: str | None, user: str) -> None:
    """Two sessions: session 2 uses what session 1 was told.

    Replaces the demo user's memories in the data folder; afterwards
    `agentscope-mem0 list --user alice` shows what was remembered.
    """
    from ..demo import run_demo
    from ._errors import translate_errors

    # A missing [local] extra (or a locked folder) exits 2 (3) with the fix,
    # not a traceback.
    with translate_errors():
        asyncio.run(run_demo(mode, folder=folder, user_id=user))  # type: ignore[arg-type]
