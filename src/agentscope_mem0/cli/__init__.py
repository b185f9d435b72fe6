"""The ``agentscope-mem0`` command."""

from __future__ import annotations

from ._app import cli, main

__all__ = ["cli", "main"]
