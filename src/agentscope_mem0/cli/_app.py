"""Command group and entry point."""

from __future__ import annotations

import asyncio
import logging

import click

from ._errors import ExitCode
from ._memories import add, forget, history, list_memories, search
from ._status import retry_failed, status
from ._transfer import export, import_memories

__all__ = ["cli", "main"]

_EPILOG = """\
Configuration: --folder (or $AGENTSCOPE_MEM0_DIR) picks the embedded data folder;
--config FILE (or $AGENTSCOPE_MEM0_CONFIG) names another backend: pgvector, a
Qdrant server or hosted mem0. Exit codes: 0 ok, 1 not found, 2 usage or
configuration, 3 backend unreachable or folder locked, 4 backend failure.
"""


@click.group(epilog=_EPILOG, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("-v", "--verbose", is_flag=True, help="Log what mem0 and the middleware do.")
@click.version_option(package_name="agentscope-mem0")
def cli(verbose: bool) -> None:
    """See and manage what AgentScope agents remember (mem0-backed)."""
    logging.basicConfig(level=logging.INFO if verbose else logging.ERROR)
    if not verbose:
        # psycopg pins its logger to WARNING; its pool retries would flood stderr.
        logging.getLogger("psycopg").setLevel(logging.ERROR)


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


for _command in (
    list_memories,
    search,
    add,
    forget,
    history,
    export,
    import_memories,
    status,
    retry_failed,
):
    cli.add_command(_command)


def main() -> None:
    """Console-script entry point."""
    try:
        cli(standalone_mode=True)
    except KeyboardInterrupt:  # pragma: no cover - click turns it into Abort first
        raise SystemExit(int(ExitCode.INTERRUPTED)) from None
