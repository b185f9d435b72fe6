"""Command group and entry point.

The group knows its commands by name only (:data:`COMMANDS`): a command's
module, and with it agentscope, mem0 or qdrant, is imported when that command
runs or shows its own help, so ``agentscope-mem0 --help`` and ``--version``
start at once. To add a command, add one row to the table.
"""

from __future__ import annotations

import importlib
import logging
from typing import Any

import click

__all__ = ["COMMANDS", "cli", "main"]

_EPILOG = """\
Configuration: --folder (or $AGENTSCOPE_MEM0_DIR) picks the embedded data folder;
--config FILE (or $AGENTSCOPE_MEM0_CONFIG) names another backend: pgvector, a
Qdrant server or hosted mem0. Exit codes: 0 ok, 1 not found, 2 usage or
configuration, 3 backend unreachable or folder locked, 4 backend failure.
"""

COMMANDS: dict[str, tuple[str, str, str]] = {
    "demo": (
        "._demo_command",
        "demo",
        "Four sessions: later ones use what was told; a move supersedes.",
    ),
    "list": ("._memories", "list_memories", "List a user's memories, newest first."),
    "search": ("._memories", "search", "Search a user's memories, best first."),
    "add": ("._memories", "add", "Add a memory, through mem0's extraction or verbatim."),
    "forget": ("._memories", "forget", "Forget one memory, or all of a user's."),
    "history": ("._memories", "history", "Show mem0's change history of one memory."),
    "restore": (
        "._memories",
        "restore",
        "Make a superseded or merged memory current again (not a change).",
    ),
    "export": ("._transfer", "export", "Write memories as JSONL."),
    "import": ("._transfer", "import_memories", "Import memories from an export."),
    "working": ("._working_memory", "working", "Show or clear a user's working memory."),
    "profile": ("._profile", "profile", "Show, edit, refresh or clear a user's profile."),
    "status": ("._status", "status", "Show the configuration and the store's health."),
    "retry-failed": ("._queued_writes", "retry_failed", "Requeue the writes that failed."),
    "migrate": ("._maintenance", "migrate", "Move a release-0.1 folder to Qdrant Edge."),
    "optimize": ("._maintenance", "optimize", "Build the embedded store's HNSW index."),
    "ui": (".ui._serve", "ui", "Browse, search and correct memories in a local web page."),
}
"""Every command, in the order ``--help`` lists them: its module under
``agentscope_mem0.cli``, the ``click.Command`` there, and the line ``--help``
shows for it without importing the module."""


class _LazyGroup(click.Group):
    """A group that imports a command's module only when the command is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        module, attribute, _ = COMMANDS[cmd_name]
        command: click.Command = getattr(importlib.import_module(module, __package__), attribute)
        return command

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a reader that closed stdout (``| head``) ends it quietly, exit 0."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            from ._exit_codes import silence_stdout

            silence_stdout()
            raise click.exceptions.Exit(0) from None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        with formatter.section("Commands"):
            formatter.write_dl([(name, summary) for name, (_, _, summary) in COMMANDS.items()])


@click.group(
    cls=_LazyGroup,
    epilog=_EPILOG,
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option("-v", "--verbose", is_flag=True, help="Log what mem0 and the middleware do.")
@click.version_option(package_name="agentscope-mem0")
def cli(verbose: bool) -> None:
    """See and manage what AgentScope agents remember (mem0-backed)."""
    from .._mem0 import quiet

    logging.basicConfig(level=logging.INFO if verbose else logging.ERROR)
    # -v asks for mem0's logs: its notices about missing extras included.
    quiet.set_demoted(not verbose)
    if not verbose:
        # psycopg pins its logger to WARNING; its pool retries would flood stderr.
        logging.getLogger("psycopg").setLevel(logging.ERROR)


def main() -> None:
    """Console-script entry point."""
    cli()
