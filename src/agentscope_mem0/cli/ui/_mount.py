"""The inspector served by the application that owns an embedded data folder.

The embedded store opens in one process at a time, so ``agentscope-mem0 ui``
cannot open a folder a running service holds. The service can serve the
inspector itself instead, on its own mem0 client, mounted under a path of its
``agentscope.app`` (:meth:`~agentscope_mem0.service.Mem0MiddlewareFactory.mount_inspector`),
behind the same token, host and CSRF rules (:class:`~._security.Guard`). It
notes the path in the data folder (:data:`MOUNT_FILE`), so that ``ui`` on the
busy folder can say where the inspector is.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from pathlib import Path
from typing import Any, Protocol

from ._security import TOKEN_ENV, check_bind

__all__ = [
    "MOUNT_FILE",
    "ClientSource",
    "MountedInspector",
    "listening_ports",
    "mount_inspector",
    "mounted_at",
    "note_mount",
]

logger = logging.getLogger(__name__)

MOUNT_FILE = "inspector.json"
"""In the data folder: the process serving its inspector, and the path."""


class ClientSource(Protocol):
    """What the inspector needs of a service's factory: its shared mem0 client."""

    async def get_client(self) -> Any:
        """The client, built on first use."""
        ...


class MountedInspector:
    """An ASGI app: the inspector on a factory's shared client, built on first request.

    Args:
        factory: The service's middleware factory (embedded default).
        folder: Its data folder.
        token: Access token every request must carry; ``None`` answers only
            requests that name a loopback host (as ``ui`` on 127.0.0.1 does).
    """

    def __init__(self, factory: ClientSource, folder: Path, token: str | None) -> None:
        if token is not None:
            check_bind("0.0.0.0", token)  # a token must be long enough to be a secret
        self._factory = factory
        self._folder = folder
        self._token = token
        self._app: Any = None
        self._building = asyncio.Lock()

    async def _build(self) -> Any:
        from .._config import Settings
        from .._store import MemoryStore
        from ._inspector import Inspector
        from ._web import create_app

        client = await self._factory.get_client()
        settings = Settings(backend="embedded", folder=self._folder, outbox=self._folder)
        # The factory's client: the factory closes it, the inspector never does.
        store = MemoryStore(client, settings=settings, embedding_model=None)
        return create_app(
            Inspector(store, settings), token=self._token, loopback=self._token is None
        )

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._app is None:
            async with self._building:
                if self._app is None:
                    self._app = await self._build()
        await self._app(scope, receive, send)


def mount_inspector(
    factory: ClientSource,
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
    app.mount(path, MountedInspector(factory, root, token or os.environ.get(TOKEN_ENV) or None))
    note_mount(root, path)
    return app


def note_mount(folder: Path, path: str) -> None:
    """Record in ``folder`` that this process serves its inspector under ``path``."""
    try:
        (folder / MOUNT_FILE).write_text(
            json.dumps({"pid": os.getpid(), "path": path}), encoding="utf-8"
        )
    except OSError as exc:  # only a hint for `agentscope-mem0 ui`
        logger.info("could not note the inspector's path in %s: %s", folder, exc)


def mounted_at(folder: Path, pid: int) -> str | None:
    """The path under which process ``pid`` serves ``folder``'s inspector, if it does."""
    try:
        noted = json.loads((folder / MOUNT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(noted, dict) or noted.get("pid") != pid:
        return None
    path = noted.get("path")
    return path if isinstance(path, str) else None


def listening_ports(pid: int) -> list[int]:
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
