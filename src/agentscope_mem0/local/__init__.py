"""The embedded default: one data folder holding the vector store, mem0's
history database and the middleware's own files."""

from __future__ import annotations

from ._folder import DATA_DIR_ENV, data_dir, embedded_store_config

__all__ = ["DATA_DIR_ENV", "data_dir", "embedded_store_config"]
