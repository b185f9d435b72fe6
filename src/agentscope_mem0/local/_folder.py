"""Where the embedded default keeps its files."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["DATA_DIR_ENV", "data_dir", "embedded_store_config"]

DATA_DIR_ENV = "AGENTSCOPE_MEM0_DIR"
"""Environment variable naming the data folder."""

COLLECTION = "agentscope_mem0"


def data_dir(folder: str | os.PathLike[str] | None = None) -> Path:
    """Resolve (and create) the data folder.

    Args:
        folder: An explicit folder; otherwise ``$AGENTSCOPE_MEM0_DIR``, otherwise
            ``~/.agentscope-mem0``.

    Returns:
        The absolute folder path.
    """
    chosen = folder or os.environ.get(DATA_DIR_ENV) or Path.home() / ".agentscope-mem0"
    path = Path(chosen).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def embedded_store_config(
    *, dims: int, folder: str | os.PathLike[str] | None = None
) -> dict[str, Any]:
    """The ``MemoryConfig`` fields for an on-disk Qdrant and history in one folder.

    Args:
        dims: The embedding model's vector size.
        folder: The data folder (see :func:`data_dir`).

    Returns:
        ``vector_store`` and ``history_db_path`` entries for ``MemoryConfig``.
    """
    root = data_dir(folder)
    return {
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "collection_name": COLLECTION,
                "embedding_model_dims": dims,
                "path": str(root / "qdrant"),
                "on_disk": True,
            },
        },
        "history_db_path": str(root / "history.db"),
    }
