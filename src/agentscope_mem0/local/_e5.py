"""What the offline embedder makes, known without loading it (or AgentScope).

The CLI's reading commands check a folder's vector size against the
configured embedder's; for the default one these constants say it, so that
``list`` or ``status`` neither imports the embedder nor needs the
``[local]`` extra.
"""

from __future__ import annotations

__all__ = ["E5_DIMENSIONS", "E5_MODEL_NAME"]

E5_DIMENSIONS = 384
"""Vector size of multilingual-e5-small."""

E5_MODEL_NAME = "multilingual-e5-small-q4"
"""The ``model`` name the embedding reports."""
