"""``agentscope-mem0 ui``: serve the memory inspector on the configured store."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from .._common import store_command, where
from .._errors import ExitCode, UnreachableError, UsageError
from ._security import TOKEN_ENV, check_bind, is_loopback

if TYPE_CHECKING:
    from .._config import Settings
    from .._output import Output

__all__ = ["check_free", "serve", "ui", "url_of"]


def check_free(settings: Settings) -> None:
    """Refuse to start on an embedded folder another process holds, naming it.

    Raises:
        UnreachableError: The folder's store lock is held by another process.
    """
    if settings.backend != "embedded":
        return
    from .._lock import lock_holder
    from ._mount import listening_ports, mounted_at

    holder = lock_holder(settings.folder)
    if holder is None or holder.is_self:
        return
    path = mounted_at(settings.folder, holder.pid)
    if path is not None:
        ports = listening_ports(holder.pid)
        where = (
            " or ".join(f"http://127.0.0.1:{port}{path.rstrip('/')}/" for port in ports)
            if ports
            else f"{path.rstrip('/')}/ on its address"
        )
        raise UnreachableError(
            f"the data folder {settings.folder} is in use by {holder.describe()}, which "
            f"serves its inspector: open {where} (with the token that process was given, "
            "if any)"
        )
    raise UnreachableError(
        f"the data folder {settings.folder} is in use by {holder.describe()}; the "
        "inspector needs the folder to itself: stop that process (or run the "
        "inspector when it is done), or use another --folder. A service built with "
        "mem0_middleware_factory can serve the inspector itself "
        "(factory.mount_inspector(app), see docs/inspector.md)"
    )


def url_of(host: str, port: int, token: str | None) -> str:
    """The address to open in a browser (with the token, when there is one)."""
    name = f"[{host}]" if ":" in host else host
    return f"http://{name}:{port}/" + (f"?token={token}" if token else "")


async def serve(
    app: Any, *, host: str, port: int, on_ready: Callable[[int], None] | None = None
) -> None:
    """Run ``app`` with uvicorn until interrupted; ``on_ready(port)`` once it listens."""
    import uvicorn

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        if task.done():
            await task  # it failed to start (port in use): its error surfaces here
            raise UsageError(f"could not listen on {host}:{port}")
        await asyncio.sleep(0.02)
    if on_ready is not None:
        on_ready(int(server.servers[0].sockets[0].getsockname()[1]))
    await task


@click.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; anything but loopback needs --token.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port to listen on (0 picks a free one).",
)
@click.option(
    "--token",
    default=None,
    help=f"Access token every request must carry (default ${TOKEN_ENV}); required off loopback.",
)
@store_command(json_option=False, reads=True)
def ui(*, settings: Settings, out: Output, host: str, port: int, token: str | None) -> None:
    """Browse, search and correct memories in a local web page.

    Lists users, a user's memories newest first (what supersedes what, by
    agent, paged), each memory's timeline, working memory, search with the
    middleware's own scores, forgetting (with confirmation), the write outbox
    with retry and counters. Serves 127.0.0.1 by default; another --host
    needs --token. On the embedded store it holds the data folder while it
    runs, like any application using it; on a folder a service holds, it
    says where that service serves its own inspector.
    """
    token = token or os.environ.get(TOKEN_ENV) or None
    try:
        check_bind(host, token)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise UsageError(
            f"the inspector needs Starlette and uvicorn ({exc.name} is missing): "
            "pip install starlette uvicorn (the [service] extra)"
        ) from exc
    check_free(settings)
    from .._open import open_store
    from ._inspector import Inspector
    from ._web import create_app

    store = open_store(settings)
    try:
        app = create_app(Inspector(store, settings), token=token, loopback=is_loopback(host))

        def ready(bound: int) -> None:
            click.echo(f"Serving {where(settings)} at {url_of(host, bound, token)}")
            click.echo("Press Ctrl+C to stop.", err=True)

        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(app, host=host, port=port, on_ready=ready))
    except OSError as exc:
        raise click.ClickException(f"could not serve on {host}:{port}: {exc}") from exc
    finally:
        store.close()
    raise click.exceptions.Exit(int(ExitCode.OK))
