"""Where a client's write outbox lives when nobody named a folder.

Writes must survive the process on every path, also when a user passes only
models and a ``mem0_config`` (the built-in middleware's usage). The outbox
then goes next to the store's own files, so that the next middleware on the
same store finds and replays what was left:

* the vector store lies inside the folder of mem0's ``history_db_path``
  (the embedded default, and any config that keeps both together): that
  folder, as :meth:`Mem0Middleware.local` does;
* otherwise (a server store, or the history elsewhere):
  ``<history folder>/agentscope-mem0-outbox/<provider>-<hash>`` (the data
  folder in place of a history kept in memory), where the
  hash names where the vector store keeps its data (provider, host, port,
  database, user, path, collection; tunables and secrets left out, a DSN
  read for its parts), so two stores never replay each other's writes;
* the hosted platform (no local files): ``<data folder>/outbox-hosted-<hash>``
  of the host and the API key's hash;
* a client of another kind (a test double): ``None``, writes stay in memory.

The CLI's ``status``, ``retry-failed`` and ``ui`` reach the same folder
through :func:`outbox_dir_for_config` and :func:`hosted_outbox_dir`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .._scope import is_hosted

__all__ = ["default_outbox_dir", "hosted_outbox_dir", "outbox_dir_for_config"]

logger = logging.getLogger(__name__)

_MEMORY = ("", ":memory:")
# The same collection on the same server, whichever provider serves it (this
# package's Qdrant provider replaced mem0's in 0.3): one outbox, so a write
# queued before an upgrade is replayed after it.
_SAME_STORE = {"agentscope_qdrant": "qdrant"}
_HOSTED_DEFAULT = "https://api.mem0.ai"

# The settings that say where a store's data is (server, database, table or
# folder); tunables such as the vector size, pool sizes or index kinds do not
# name another store, and secrets are left out so that rotating one keeps the
# outbox.
_WHERE_KEYS = (
    "url",
    "host",
    "port",
    "path",
    "dbname",
    "database",
    "user",
    "username",
    "collection_name",
    "index_name",
    "namespace",
)


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _dsn_parts(dsn: str) -> dict[str, str]:
    """Host, port, database and user of a libpq connection string (URI or key=value)."""
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = {k: str(v) for k, v in conninfo_to_dict(dsn).items() if v is not None}
    except ImportError:
        split = urlsplit(dsn)
        parts = {
            "host": split.hostname or "",
            "port": str(split.port or ""),
            "dbname": split.path.lstrip("/"),
            "user": split.username or "",
        }
    except Exception:  # not a DSN psycopg reads: mem0 will say so; name it as given
        return {"dsn": _digest(dsn)}
    if not parts.get("port"):
        parts["port"] = "5432"
    return {k: parts.get(k, "") for k in ("host", "port", "dbname", "user")}


def _store_identity(vector_store: Any) -> tuple[str, dict[str, Any], str | None]:
    """The vector store's provider, the settings naming its data and its local path."""
    provider = str(getattr(vector_store, "provider", "") or "store")
    provider = _SAME_STORE.get(provider, provider)
    config: Any = getattr(vector_store, "config", None)
    if hasattr(config, "model_dump"):
        fields = config.model_dump()
    elif isinstance(config, dict):
        fields = dict(config)
    else:
        fields = {}
    kept = {
        k: str(fields[k])  # a port as 5432 or "5432" names one server
        for k in _WHERE_KEYS
        if isinstance(fields.get(k), str | int | float | bool) and fields.get(k) != ""
    }
    dsn = fields.get("connection_string")
    if isinstance(dsn, str) and dsn:
        # mem0 connects by the string alone; the separate fields are ignored then.
        for key in ("host", "port", "dbname", "user"):
            kept.pop(key, None)
        kept.update(_dsn_parts(dsn))
    path = fields.get("path")
    return provider, kept, str(path) if isinstance(path, str) and path else None


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def hosted_outbox_dir(host: str | None, key_hash: str) -> Path:
    """The outbox folder for the hosted platform at ``host`` and an API key's MD5.

    ``key_hash`` is what mem0's client keeps as ``user_id`` (the key's MD5), so
    the CLI, which knows the key, and the middleware, which has the client,
    reach the same folder.
    """
    from ..local import data_dir

    who = {"host": host or _HOSTED_DEFAULT, "key": key_hash}
    return data_dir() / f"outbox-hosted-{_digest(who)}"


def outbox_dir_for_config(config: Any) -> Path | None:
    """The outbox folder for a mem0 ``MemoryConfig`` (see the module's rules).

    Args:
        config: The config the client runs with: its ``vector_store`` and
            ``history_db_path`` decide the place.

    Returns:
        The folder, or ``None`` when the config names no vector store.
    """
    vector_store = getattr(config, "vector_store", None)
    if config is None or vector_store is None:
        return None
    provider, identity, store_path = _store_identity(vector_store)
    history = str(getattr(config, "history_db_path", "") or "")
    if history in _MEMORY:
        from ..local import data_dir

        root = data_dir()
    else:
        root = Path(history).expanduser().resolve().parent
        if store_path is not None and _inside(Path(store_path).expanduser(), root):
            return root
    return root / "agentscope-mem0-outbox" / f"{provider}-{_digest(identity)}"


def default_outbox_dir(client: Any) -> Path | None:
    """The outbox folder for ``client`` (see the module's rules), or ``None``."""
    if is_hosted(client):
        return hosted_outbox_dir(getattr(client, "host", None), getattr(client, "user_id", ""))
    return outbox_dir_for_config(getattr(client, "config", None))
