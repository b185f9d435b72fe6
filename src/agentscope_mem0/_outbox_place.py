"""Where a client's write outbox lives when nobody named a folder.

Writes must survive the process on every path, also when a user passes only
models and a ``mem0_config`` (the built-in middleware's usage). The outbox
then goes next to the store's own files, so that the next middleware on the
same store finds and replays what was left:

* the vector store lies inside the folder of mem0's ``history_db_path``
  (the embedded default, and any config that keeps both together): that
  folder, as :meth:`Mem0Middleware.local` does;
* otherwise (a server store, or the history elsewhere):
  ``<history folder>/agentscope-mem0-outbox/<provider>-<hash>``, where the
  hash names the vector store (provider, host, port, path, collection, ...;
  secrets left out), so two stores never replay each other's writes;
* the hosted platform (no local files): ``<data folder>/outbox-hosted-<hash>``
  of the host and the API key's hash;
* a client of another kind (a test double): ``None``, writes stay in memory.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

__all__ = ["default_outbox_dir"]

logger = logging.getLogger(__name__)

_SECRET_WORDS = ("password", "api_key", "apikey", "token", "secret", "credential")
_MEMORY = ("", ":memory:")


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _store_identity(vector_store: Any) -> tuple[str, dict[str, Any], str | None]:
    """The vector store's provider, its identifying settings and its local path."""
    provider = str(getattr(vector_store, "provider", "") or "store")
    config: Any = getattr(vector_store, "config", None)
    if hasattr(config, "model_dump"):
        fields = config.model_dump()
    elif isinstance(config, dict):
        fields = dict(config)
    else:
        fields = {}
    kept = {
        k: v
        for k, v in fields.items()
        if not any(word in k.lower() for word in _SECRET_WORDS)
        and isinstance(v, str | int | float | bool | type(None))
    }
    path = fields.get("path")
    return provider, kept, str(path) if isinstance(path, str) and path else None


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
    except ValueError:
        return False
    return True


def default_outbox_dir(client: Any) -> Path | None:
    """The outbox folder for ``client`` (see the module's rules), or ``None``."""
    from mem0 import AsyncMemoryClient

    if isinstance(client, AsyncMemoryClient):
        from .local import data_dir

        who = {"host": getattr(client, "host", ""), "key": getattr(client, "user_id", "")}
        return data_dir() / f"outbox-hosted-{_digest(who)}"
    config = getattr(client, "config", None)
    vector_store = getattr(config, "vector_store", None)
    if config is None or vector_store is None:
        return None
    provider, identity, store_path = _store_identity(vector_store)
    history = str(getattr(config, "history_db_path", "") or "")
    if history in _MEMORY:
        from .local import data_dir

        root = data_dir()
    else:
        root = Path(history).expanduser().resolve().parent
        if store_path is not None and _inside(Path(store_path).expanduser(), root):
            return root
    return root / "agentscope-mem0-outbox" / f"{provider}-{_digest(identity)}"
