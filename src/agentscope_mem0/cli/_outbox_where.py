"""Which write outbox a command reads: the one the middleware uses for the same store.

Without ``outbox_dir`` in the config file, the middleware puts a store's
outbox next to the store's files (see :mod:`agentscope_mem0._outbox_place`).
This module builds the mem0 config the command would open (without
connecting) and asks that same rule, so ``status``, ``retry-failed`` and
``ui`` see the pending and failed writes an application left for this store.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

from .._exceptions import ConfigurationError
from .._outbox_place import hosted_outbox_dir, outbox_dir_for_config

if TYPE_CHECKING:
    from ._config import Settings

__all__ = ["store_outbox_dir"]

# The vector size does not name a store (see _outbox_place); the config
# builders only need a valid one.
_ANY_DIMS = 8


def store_outbox_dir(settings: Settings) -> Path:
    """The outbox folder of the store ``settings`` name.

    Args:
        settings: The command's settings; their ``outbox_dir`` is ignored here.

    Returns:
        The data folder for the embedded store; for a server store, the folder
        :func:`~agentscope_mem0._outbox_place.outbox_dir_for_config` gives its
        mem0 config; for the hosted platform, the one of its host and API key.

    Raises:
        ConfigurationError: The server settings do not make a mem0 config.
    """
    if settings.backend == "embedded":
        return settings.folder
    if settings.backend == "hosted":
        key = settings.api_key or ""
        return hosted_outbox_dir(settings.url, hashlib.md5(key.encode()).hexdigest())
    from mem0.configs.base import MemoryConfig

    from ..local import history_db_path

    history = str(settings.history_db) if settings.history_db else str(history_db_path())
    fields = settings.server_fields(dims=_ANY_DIMS, history_db_path=history)
    try:
        config = MemoryConfig(**fields)
    except ValueError as exc:
        raise ConfigurationError(f"the {settings.backend} settings are not valid: {exc}") from exc
    place = outbox_dir_for_config(config)
    return place if place is not None else settings.folder
