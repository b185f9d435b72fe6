"""The Qdrant server provider's config, and its registration with mem0's factory.

:data:`PROVIDER` names :class:`~.qdrant_store.HybridQdrant`. Its config is
mem0's own ``QdrantConfig`` (server address, key, collection, vector size)
plus how the dense and keyword rankings are fused. mem0's
``VectorStoreConfig`` keeps its whitelist: the subclass built here accepts
:data:`PROVIDER` and nothing else. Build a ``MemoryConfig`` holding it with
``agentscope_mem0.build_mem0_config(mem0_config=...)``.
"""

from __future__ import annotations

from typing import Any

from mem0.configs.vector_stores.qdrant import QdrantConfig

from .._vectors.fusion import FusionSettings

__all__ = ["PROVIDER", "HybridQdrantConfig", "qdrant_config_class"]

PROVIDER = "agentscope_qdrant"
"""The vector-store provider name of a Qdrant server with hybrid search."""


class HybridQdrantConfig(QdrantConfig, FusionSettings):
    """mem0's ``QdrantConfig`` plus the fusion settings of the embedded store."""


_config_class: type | None = None


def qdrant_config_class() -> type:
    """``VectorStoreConfig`` subclass that accepts :data:`PROVIDER` and nothing else."""
    global _config_class
    if _config_class is not None:
        return _config_class
    from mem0.utils.factory import VectorStoreFactory
    from mem0.vector_stores.configs import VectorStoreConfig
    from pydantic import model_validator

    class HybridQdrantStoreConfig(VectorStoreConfig):
        @model_validator(mode="after")
        def validate_and_create_config(self) -> HybridQdrantStoreConfig:
            if self.provider != PROVIDER:
                raise ValueError(f"Unsupported vector store provider: {self.provider}")
            given: Any = getattr(self, "config", None)
            if not isinstance(given, HybridQdrantConfig):
                if not isinstance(given, dict):
                    raise ValueError(f"the {PROVIDER} vector store needs a config dict")
                setattr(self, "config", HybridQdrantConfig(**given))  # noqa: B010
            return self

    VectorStoreFactory.provider_to_class[PROVIDER] = f"{__package__}.qdrant_store.HybridQdrant"
    _config_class = HybridQdrantStoreConfig
    return _config_class
