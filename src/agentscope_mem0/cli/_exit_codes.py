"""Exit codes, and the one place that turns the package's errors into them.

======  =====================================================================
code    meaning
======  =====================================================================
0       success
1       not found: an unknown memory id, a user (or scope) with no memories,
        an extraction that stored nothing
2       usage or configuration mistake: a bad option or config file, a
        malformed import file, an embedder whose size differs from the store's
3       backend unavailable: unreachable server, or the data folder is locked
        by another process
4       the backend failed during the operation, or an operation finished
        only partly (some imports failed, a forgotten memory is still there)
130     interrupted (Ctrl-C); an import can be resumed by running it again
======  =====================================================================
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from typing import IO, Any

import click

from .._exceptions import (
    BackendError,
    ConfigurationError,
    Mem0MiddlewareError,
    StoreLockedError,
)

__all__ = [
    "CliError",
    "Interrupted",
    "NotFoundError",
    "UnreachableError",
    "UsageError",
    "failure",
    "silence_stdout",
    "translate_errors",
]

logger = logging.getLogger(__name__)


class CliError(click.ClickException):
    """An error shown as ``Error: <message>``; the backend failed: exit code 4.

    Each subclass is one exit code (click keeps it on the class).
    """

    exit_code = 4

    def show(self, file: IO[Any] | None = None) -> None:
        """Print the message to stderr."""
        click.echo(f"Error: {self.format_message()}", err=True)


class NotFoundError(CliError):
    """Nothing matched: exit code 1."""

    exit_code = 1


class UsageError(CliError):
    """A usage or configuration mistake: exit code 2."""

    exit_code = 2


class UnreachableError(CliError):
    """The backend cannot be used right now: exit code 3."""

    exit_code = 3


class Interrupted(CliError):
    """Ctrl-C: exit code 130."""

    exit_code = 130


_UNREACHABLE_NAMES = (
    "connect",
    "timeout",
    "timedout",
    "operationalerror",
    "responsehandling",
    "unavailable",
    "network",
    "refused",
)


def _is_unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` (or what caused it) says the backend could not be reached."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionError | TimeoutError):
            return True
        name = type(current).__name__.lower()
        if any(word in name for word in _UNREACHABLE_NAMES):
            return True
        current = current.__cause__ or current.__context__
    return False


def failure(message: str, cause: BaseException) -> CliError:
    """Exit 3 when ``cause`` says the backend could not be reached, else 4."""
    return UnreachableError(message) if _is_unreachable(cause) else CliError(message)


# The library's advice names keywords (``folder=...``); a command's user has
# flags and environment variables. Each library phrase, worded for the CLI.
_IN_FLAGS = (
    ("folder=... or $AGENTSCOPE_MEM0_DIR", "--folder or $AGENTSCOPE_MEM0_DIR"),
    (
        "point mem0_config's vector_store at its url",
        'name it in a --config file (backend = "qdrant")',
    ),
    (
        "Use the embedding model these memories were stored with",
        "Use the embedding model these memories were stored with ($AGENTSCOPE_MEM0_EMBEDDER, "
        "or embedding_model in the --config file)",
    ),
    ("pass embedding_model=...", "set $AGENTSCOPE_MEM0_EMBEDDER"),
)


def _in_flags(message: str) -> str:
    for library, command in _IN_FLAGS:
        message = message.replace(library, command)
    return message


def silence_stdout() -> None:
    """Send what is still buffered for stdout nowhere: its reader is gone.

    Without it, Python's exit flush meets the closed pipe again and prints
    "Exception ignored ... BrokenPipeError".
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # not a file descriptor (an in-process runner)
        pass


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Turn the package's exceptions into :class:`CliError` with the right code.

    A closed stdout (``| head``) passes through: the command group ends quietly.
    """
    try:
        yield
    except (click.ClickException, click.exceptions.Abort, click.exceptions.Exit, BrokenPipeError):
        raise
    except KeyboardInterrupt as exc:
        raise Interrupted("interrupted") from exc
    except StoreLockedError as exc:
        raise UnreachableError(_in_flags(str(exc))) from exc
    except ConfigurationError as exc:
        raise UsageError(_in_flags(str(exc))) from exc
    except BackendError as exc:
        text = f"the backend is unreachable: {exc}" if _is_unreachable(exc) else str(exc)
        raise failure(text, exc) from exc
    except Mem0MiddlewareError as exc:
        raise CliError(str(exc)) from exc
    except Exception as exc:
        # A failure nobody mapped: say what it was; -v shows the traceback.
        logger.info("unexpected failure", exc_info=True)
        if _is_unreachable(exc):
            raise UnreachableError(f"the backend is unreachable: {exc}") from exc
        raise CliError(f"{type(exc).__name__}: {exc} (run with -v for the traceback)") from exc
