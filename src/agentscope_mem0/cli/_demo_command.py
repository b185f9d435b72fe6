"""``demo``: the four-session demo on the embedded store."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import Coroutine
from types import FrameType
from typing import Any

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
        _run_until_ctrl_c(run_demo(mode, folder=folder, user_id=user), folder)  # type: ignore[arg-type]


def _run_until_ctrl_c(demo: Coroutine[Any, Any, Any], folder: str | None) -> None:
    """Run the demo; a first Ctrl-C lets it store its writes (it says what it
    waits for), a second one stops the process at once.

    A second Ctrl-C under ``asyncio.run`` raises inside the event loop while
    mem0's threads still run, and their late callbacks print tracebacks
    ("Event loop is closed"); stopping the process loses nothing, since an
    acknowledged write is in the outbox, which the next start delivers.
    """
    from ..local import data_dir

    task: asyncio.Task[Any] | None = None
    presses = 0

    async def main() -> None:
        nonlocal task
        task = asyncio.current_task()
        await demo

    def on_ctrl_c(signum: int, frame: FrameType | None) -> None:
        nonlocal presses
        presses += 1
        if presses == 1 and task is not None:
            task.get_loop().call_soon_threadsafe(task.cancel)
            return
        click.echo(
            "\nstopped; writes not stored yet stay in the outbox in "
            f"{data_dir(folder)} and are stored the next time a memory opens that folder.",
            err=True,
        )
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(130)

    previous = signal.signal(signal.SIGINT, on_ctrl_c)
    try:
        with asyncio.Runner() as runner:
            runner.run(main())
    except asyncio.CancelledError:
        raise click.exceptions.Exit(130) from None  # the demo said what it stored
    finally:
        signal.signal(signal.SIGINT, previous)
