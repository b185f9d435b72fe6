"""Serving the memory inspector: ``agentscope-mem0 ui``, or mounted in a service.

The embedded store opens in one process at a time, so ``ui`` cannot open a
folder a running service holds. The service can serve the inspector itself
instead, on its own mem0 client, mounted under a path of its ``agentscope.app``
(:meth:`~agentscope_mem0.service.Mem0MiddlewareFactory.mount_inspector`),
behind the same token, host and CSRF rules (:class:`~._security.Guard`). It
notes the path in the data folder (:data:`MOUNT_FILE`), so that ``ui`` on the
busy folder can say where the inspector is.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .._common import store_command, where
from .._exit_codes import UnreachableError, UsageError
from ._security import TOKEN_ENV, check_bind

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._config import Settings
    from .._output import Output
    from ._web import AgentNames

__all__ = ["MOUNT_FILE", "MountedInspector", "mount_inspector", "ui"]

logger = logging.getLogger(__name__)

MOUNT_FILE = "inspector.json"
"""In the data folder: the process serving its inspector, and the path."""


# -- agentscope-mem0 ui -------------------------------------------------------------


def _check_free(settings: Settings) -> None:
    """Refuse to start on an embedded folder another process holds, naming it
    (and, when it serves the inspector itself, where).

    Raises:
        UnreachableError: The folder's store lock is held by another process.
    """
    if settings.backend != "embedded":
        return
    from .._lock import lock_holder

    holder = lock_holder(settings.folder)
    if holder is None or holder.is_self:
        return
    path = _mounted_at(settings.folder, holder.pid)
    if path is not None:
        ports = _listening_ports(holder.pid)
        path = path.rstrip("/")
        address = (
            " or ".join(f"http://127.0.0.1:{port}{path}/" for port in ports)
            if ports
            else f"{path}/ on its address"
        )
        raise UnreachableError(
            f"the data folder {settings.folder} is in use by {holder.describe()}, which "
            f"serves its inspector: open {address} (with the token that process was given, "
            "if any)"
        )
    raise UnreachableError(
        f"the data folder {settings.folder} is in use by {holder.describe()}; the "
        "inspector needs the folder to itself: stop that process (or run the "
        "inspector when it is done), or use another --folder. A service built with "
        "mem0_middleware_factory can serve the inspector itself "
        "(factory.mount_inspector(app), see docs/inspector.md)"
    )


def _listening_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port`` (0: a free port the system picks).

    Bound here rather than by uvicorn, whose failure to bind is a traceback.

    Raises:
        UsageError: The port is taken, or the address cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise UsageError(
                f"port {port} on {host} is in use by another program: give another --port, "
                "or leave --port out to pick a free one"
            ) from None
        raise UsageError(f"could not listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


async def _serve(app: Any, sock: socket.socket, host: str, token: str | None, where: str) -> None:
    """Run ``app`` with uvicorn on ``sock`` until interrupted; say where once it listens."""
    import uvicorn

    bound = int(sock.getsockname()[1])
    config = uvicorn.Config(app, host=host, port=bound, log_level="warning", lifespan="off")
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            await task  # it failed to start: its error surfaces here
            raise UsageError(f"could not serve on {host}:{bound}")
        await asyncio.sleep(0.02)
    name = f"[{host}]" if ":" in host else host
    url = f"http://{name}:{bound}/" + (f"?token={token}" if token else "")
    click.echo(f"Serving {where} at {url}")
    click.echo("Press Ctrl+C to stop.", err=True)
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
    default=None,
    help="Port to listen on (default: a free one, shown in the URL it prints).",
)
@click.option(
    "--token",
    default=None,
    help=f"Access token every request must carry (default ${TOKEN_ENV}); required off loopback.",
)
@store_command(json_option=False, reads=True)
def ui(*, settings: Settings, out: Output, host: str, port: int | None, token: str | None) -> None:
    """Browse, search and correct memories in a local web page.

    Lists users, a user's memories newest first (what supersedes what, by
    agent, paged, or as they were on a date), each memory's timeline, working
    memory, the user's profile (edit, clear), search with the middleware's
    own scores, forgetting (with confirmation), the write outbox with retry
    and counters. Serves 127.0.0.1 by default; another --host
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
    _check_free(settings)
    from .._mem0_store import open_store
    from ._web import create_app

    sock = _listening_socket(host, port or 0)
    try:
        store = open_store(settings, embeds=True)
        try:
            app = create_app(store, token=token)
            with contextlib.suppress(KeyboardInterrupt):
                asyncio.run(_serve(app, sock, host, token, where(settings)))
        except OSError as exc:
            raise click.ClickException(f"could not serve on {host}:{port}: {exc}") from exc
        finally:
            store.close()
    finally:
        sock.close()
    raise click.exceptions.Exit(0)


# -- mounted in a service ------------------------------------------------------------


class MountedInspector:
    """An ASGI app: the inspector on a service's shared client, built on first request.

    Args:
        factory: The service's middleware factory (embedded default); its
            ``get_client()`` builds the shared client, which the factory closes.
        folder: Its data folder.
        token: Access token every request must carry; ``None`` answers only
            requests from this machine (a loopback peer naming a loopback host).
    """

    def __init__(self, factory: Any, folder: Path, token: str | None) -> None:
        if token is not None:
            check_bind("0.0.0.0", token)  # a token must be long enough to be a secret
        self._factory = factory
        self._folder = folder
        self._token = token
        self._app: Any = None
        self._building = asyncio.Lock()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            async with self._building:
                if self._app is None:
                    from .._config import Settings
                    from .._mem0_store import MemoryStore
                    from ._web import create_app

                    client = await self._factory.get_client()
                    settings = Settings(
                        backend="embedded", folder=self._folder, outbox=self._folder
                    )
                    store = MemoryStore(client, settings)  # no on_close: the factory's client
                    # The app's agent records name its agents (ids are 32 hex digits).
                    state = getattr(scope.get("app"), "state", None)
                    names = _agent_names(getattr(state, "storage", None))
                    self._app = create_app(store, token=self._token, agent_names=names)
        await self._app(scope, receive, send)


def _agent_names(storage: Any) -> AgentNames | None:
    """Agents' names from agentscope.app's storage (``get_agent(user_id, agent_id)``
    answers a record whose ``data.name`` is the name); ``None`` without one."""
    if not callable(getattr(storage, "get_agent", None)):
        return None

    async def names(user_id: str, agent_ids: Sequence[str]) -> dict[str, str]:
        found = {}
        for agent_id in agent_ids:
            record = await storage.get_agent(user_id, agent_id)
            name = getattr(getattr(record, "data", None), "name", None)
            if isinstance(name, str) and name.strip():
                found[agent_id] = name
        return found

    return names


def mount_inspector(
    factory: Any,
    app: Any,
    path: str,
    *,
    token: str | None,
    folder: str | os.PathLike[str] | None,
    embedded: bool,
) -> Any:
    """Mount the inspector of ``factory``'s data folder on ``app`` under ``path``.

    Raises:
        ConfigurationError: The factory does not use the embedded store (run
            ``agentscope-mem0 ui --config FILE`` beside the service instead).
    """
    from ..._exceptions import ConfigurationError
    from ...local import data_dir

    if not embedded:
        raise ConfigurationError(
            "mount_inspector serves the embedded store the factory owns; for a server "
            "store run `agentscope-mem0 ui --config FILE` beside the service"
        )
    root = data_dir(folder)
    path = path.rstrip("/")
    token = token or os.environ.get(TOKEN_ENV) or None
    app.mount(path, MountedInspector(factory, root, token))
    if token is None:
        # The app's address is unknown here (uvicorn may bind 0.0.0.0): say the rule once.
        logger.warning(
            "the memory inspector at %s/ has no access token: it answers requests from "
            "this machine only (a loopback client naming localhost or 127.0.0.1). Behind "
            "a reverse proxy, or to open it from elsewhere, give it a token "
            "(mount_inspector(app, token=...) or $%s)",
            path,
            TOKEN_ENV,
        )
    try:  # only a hint for `agentscope-mem0 ui`
        (root / MOUNT_FILE).write_text(
            json.dumps({"pid": os.getpid(), "path": path}), encoding="utf-8"
        )
    except OSError as exc:
        logger.info("could not note the inspector's path in %s: %s", root, exc)
    return app


def _mounted_at(folder: Path, pid: int) -> str | None:
    """The path under which process ``pid`` serves ``folder``'s inspector, if it does."""
    try:
        noted = json.loads((folder / MOUNT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(noted, dict) or noted.get("pid") != pid:
        return None
    path = noted.get("path")
    return path if isinstance(path, str) else None


def _listening_ports(pid: int) -> list[int]:
    """The TCP ports process ``pid`` listens on (Linux ``/proc``; empty elsewhere)."""
    try:
        sockets = {
            os.readlink(f"/proc/{pid}/fd/{fd}")[8:-1]
            for fd in os.listdir(f"/proc/{pid}/fd")
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:[")
        }
    except OSError:
        return []
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            # local_address is HEX_IP:HEX_PORT; state 0A is LISTEN; field 9 the inode.
            if len(fields) > 9 and fields[3] == "0A" and fields[9] in sockets:
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return sorted(ports)
