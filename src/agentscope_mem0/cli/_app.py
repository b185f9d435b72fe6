"""Command group and entry point."""

from __future__ import annotations

import asyncio
import logging

import click

__all__ = ["cli", "main"]


@click.group()
@click.option("-v", "--verbose", is_flag=True, help="Log what mem0 and the middleware do.")
def cli(verbose: bool) -> None:
    """See and manage what AgentScope agents remember (mem0-backed)."""
    logging.basicConfig(level=logging.INFO if verbose else logging.ERROR)


@cli.command()
@click.option(
    "--mode",
    type=click.Choice(["static_control", "agent_control", "both"]),
    envvar="MODE",
    default="static_control",
    show_default=True,
    help="How the agent uses memory.",
)
@click.option(
    "--folder",
    type=click.Path(file_okay=False),
    default=None,
    help="Data folder (default: $AGENTSCOPE_MEM0_DIR or ~/.agentscope-mem0).",
)
def demo(mode: str, folder: str | None) -> None:
    """Two sessions: session 2 uses what session 1 was told."""
    from ..demo import run_demo

    asyncio.run(run_demo(mode, folder=folder))  # type: ignore[arg-type]


def main() -> None:
    """Console-script entry point."""
    cli()
