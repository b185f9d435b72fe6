"""The memory inspector: ``agentscope-mem0 ui``, a local web page on the CLI's store."""

from __future__ import annotations

from ._command import ui

__all__ = ["ui"]
