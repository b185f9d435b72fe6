"""Exit codes, and the one place that turns the package's errors into them.

======  =====================================================================
code    meaning
======  =====================================================================
0       success
1       not found: an unknown memory id, a user (or scope) with no memories,
        a declined confirmation, an extraction that stored nothing
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
import enum
import logging
from collections.abc import Iterator
from typing import IO, Any

import click

from .._exceptions import (
    BackendError,
    ConfigurationError,
    DimensionMismatchError,
    Mem0MiddlewareError,
    StoreLockedError,
)

__all__ = [
    "CliError",
    "ExitCode",
    "NotFoundError",
    "UnreachableError",
    "UsageError",
    "is_unreachable",
    "translate_errors",
]

logger = logging.getLogger(__name__)


class ExitCode(enum.IntEnum):
    """The command's exit status; see the module docstring."""

    OK = 0
    NOT_FOUND = 1
    USAGE = 2
    UNAVAILABLE = 3
    FAILED = 4
    INTERRUPTED = 130


class CliError(click.ClickException):
    """An error shown as ``Error: <message>`` with a chosen exit code."""

    def __init__(self, message: str, exit_code: ExitCode = ExitCode.FAILED) -> None:
        super().__init__(message)
        self.exit_code = int(exit_code)

    def show(self, file: IO[Any] | None = None) -> None:
        """Print the message to stderr."""
        click.echo(f"Error: {self.format_message()}", err=True)


class NotFoundError(CliError):
    """Nothing matched: exit code 1."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.NOT_FOUND)


class UnreachableError(CliError):
    """The backend cannot be used right now: exit code 3."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.UNAVAILABLE)


class UsageError(CliError):
    """A usage or configuration mistake: exit code 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message, ExitCode.USAGE)


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


def is_unreachable(exc: BaseException) -> bool:
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


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Turn the package's exceptions into :class:`CliError` with the right code."""
    try:
        yield
    except click.ClickException:
        raise
    except (click.exceptions.Abort, click.exceptions.Exit):
        raise
    except KeyboardInterrupt as exc:
        raise CliError("interrupted", ExitCode.INTERRUPTED) from exc
    except StoreLockedError as exc:
        raise UnreachableError(str(exc)) from exc
    except DimensionMismatchError as exc:
        raise UsageError(str(exc)) from exc
    except ConfigurationError as exc:
        raise UsageError(str(exc)) from exc
    except BackendError as exc:
        if is_unreachable(exc):
            raise UnreachableError(f"the backend is unreachable: {exc}") from exc
        raise CliError(str(exc), ExitCode.FAILED) from exc
    except Mem0MiddlewareError as exc:
        raise CliError(str(exc), ExitCode.FAILED) from exc
    except Exception as exc:
        # A failure nobody mapped: say what it was; -v shows the traceback.
        logger.info("unexpected failure", exc_info=True)
        if is_unreachable(exc):
            raise UnreachableError(f"the backend is unreachable: {exc}") from exc
        raise CliError(
            f"{type(exc).__name__}: {exc} (run with -v for the traceback)", ExitCode.FAILED
        ) from exc
