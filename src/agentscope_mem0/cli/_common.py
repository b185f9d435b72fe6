"""What every memory command shares: options, settings, an open store, errors."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import math
import uuid
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import click

from .._exceptions import ConfigurationError
from .._scope import Scope, agent_id_from_name, check_agent_id, check_user_id
from ._config import CONFIG_ENV, Settings, load_settings, mask_url
from ._exit_codes import NotFoundError, UsageError, translate_errors
from ._mem0_store import MemoryStore, open_store
from ._models import ChatChoice
from ._output import Output

__all__ = [
    "FiniteFloatRange",
    "agent_option",
    "check_folder_exists",
    "check_memory_id",
    "describe_scope",
    "hosted_agent_note",
    "no_memories",
    "session",
    "store_command",
    "user_option",
    "where",
]

T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])


class FiniteFloatRange(click.FloatRange):
    """click's ``FloatRange`` that also refuses ``nan`` (which no bound compares
    against, so ``FloatRange`` lets it through) and infinities."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def _checked(check: Callable[[str], str]) -> Callable[..., str | None]:
    """A click callback checking an id the way the middleware checks it."""

    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
        try:
            return None if value is None else check(value)
        except ConfigurationError as exc:
            raise click.BadParameter(str(exc)) from exc

    return callback


def user_option(*, required: bool = True) -> Callable[[F], F]:
    """``--user``: whose memories (checked like the middleware checks it)."""
    return click.option(
        "--user",
        "-u",
        required=required,
        callback=_checked(check_user_id),
        help="The user id the memories belong to.",
    )


def agent_option(*, writes: bool = False) -> Callable[[F], F]:
    """``--agent``: narrow a read to one agent's memories, or name a write's agent."""
    return click.option(
        "--agent",
        "-a",
        default=None,
        # The same id the middleware derives from an agent's name.
        callback=_checked(lambda name: check_agent_id(agent_id_from_name(name))),
        help=(
            "Store the memory under this agent id too (default: the user only)."
            if writes
            else "Only memories of this agent id (default: every agent's)."
        ),
    )


def check_memory_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """A memory id as mem0 makes them (a UUID): checked when the command line
    is parsed, before any store is opened."""
    if value is None:
        return None
    try:
        return str(uuid.UUID(value))
    except ValueError as exc:
        raise click.BadParameter(
            f"{value!r} is not a memory id; ids are UUIDs such as "
            "'3f2b8c1e-5d4a-4c2b-9e1f-0a1b2c3d4e5f' (see `agentscope-mem0 list`)"
        ) from exc


def check_folder_exists(settings: Settings) -> None:
    """Refuse to read an embedded data folder that is not there.

    Opening it would create an empty store and answer "no memories": a
    mistyped ``--folder`` would look like a user who never said anything.

    Raises:
        UsageError: The folder does not exist.
    """
    if settings.backend != "embedded" or settings.folder.is_dir():
        return
    source = settings.sources.get("folder", "default")
    named = "the default data folder" if source == "default" else f"the data folder ({source})"
    raise UsageError(
        f"{named} {settings.folder} does not exist, so nothing was stored there; check "
        "the path (--folder or $AGENTSCOPE_MEM0_DIR). An application using the "
        "memory, or `agentscope-mem0 add`, creates it"
    )


def store_command(*, json_option: bool = True, reads: bool = False) -> Callable[[F], F]:
    """Give a command ``--folder``, ``--config`` (and ``--json``), error mapping,
    and call it with ``settings`` and ``out`` instead of those options.

    Args:
        json_option: Add ``--json``.
        reads: The command reads memories that must already be there: an
            embedded data folder that does not exist is refused.
    """

    def decorate(func: F) -> F:
        @functools.wraps(func)
        def wrapper(*args: Any, folder: str | None, config_path: str | None, **kwargs: Any) -> Any:
            as_json = bool(kwargs.pop("as_json", False))
            out = Output(as_json=as_json)
            with translate_errors():
                settings = load_settings(folder=folder, config_path=config_path)
                if reads:
                    check_folder_exists(settings)
                return func(*args, settings=settings, out=out, **kwargs)

        command: Any = wrapper
        if json_option:
            command = click.option(
                "--json", "as_json", is_flag=True, help="Print JSON (for scripts)."
            )(command)
        command = click.option(
            "--config",
            "config_path",
            type=click.Path(dir_okay=False),
            default=None,
            help=f"Config file naming the backend (TOML or JSON; default ${CONFIG_ENV}).",
        )(command)
        command = click.option(
            "--folder",
            type=click.Path(file_okay=False),
            default=None,
            help="Data folder (default: $AGENTSCOPE_MEM0_DIR or ~/.agentscope-mem0).",
        )(command)
        return command

    return decorate


@contextlib.contextmanager
def session(
    settings: Settings, *, chat: ChatChoice | None = None, embeds: bool = False
) -> Iterator[tuple[MemoryStore, Callable[[Coroutine[Any, Any, T]], T]]]:
    """Open the configured store for one command (see :func:`open_store`), with a
    function that runs its calls on one event loop; close it afterwards."""
    store = open_store(settings, chat=chat, embeds=embeds)
    try:
        with asyncio.Runner() as runner:
            yield store, runner.run
    finally:
        store.close()


def where(settings: Settings) -> str:
    """Where the memories are, in words."""
    if settings.backend == "embedded":
        return f"the embedded store in {settings.folder}"
    if settings.backend == "pgvector":
        return f"pgvector table {settings.collection!r} at {mask_url(settings.dsn or '')}"
    if settings.backend == "qdrant":
        return f"Qdrant collection {settings.collection!r} at {settings.url}"
    return "the hosted mem0 platform"


def describe_scope(scope: Scope) -> str:
    """``user 'alice'`` or ``user 'alice' and agent 'bot'``."""
    text = f"user {scope.user_id!r}"
    return f"{text} and agent {scope.agent_id!r}" if scope.agent_id else text


def hosted_agent_note(out: Output, store: MemoryStore, scope: Scope) -> None:
    """On the hosted platform, say why ``--agent`` did not narrow a read."""
    if store.hosted and scope.agent_id:
        out.note(
            "the hosted platform files a user's memories without the agent's id, so --agent "
            f"does not narrow them: these are the user's memories, which agent "
            f"{scope.agent_id!r} reads"
        )


def no_memories(scope: Scope, settings: Settings) -> NotFoundError:
    """The error for a user (or user and agent) with no memories."""
    return NotFoundError(
        f"no memories for {describe_scope(scope)} in {where(settings)}; check the id, "
        "the --folder or --config, and `agentscope-mem0 status`"
    )
