"""The Qdrant Edge provider's config, and its registration with mem0's factory.

:func:`edge_vector_store_config` builds the ``VectorStoreConfig`` naming
:data:`PROVIDER`. mem0's own ``VectorStoreConfig`` keeps its whitelist: a
config naming :data:`PROVIDER` without this module is still rejected, and the
subclass here accepts :data:`PROVIDER` and nothing else. Build a
``MemoryConfig`` holding it with ``agentscope_mem0.build_mem0_config(mem0_config=...)``.
"""

from __future__ import annotations

import os
from typing import Any

from pydantic import ConfigDict, Field

from .._vectors.fusion import Fusion, FusionSettings

__all__ = [
    "PROVIDER",
    "EdgeStoreConfig",
    "Fusion",
    "edge_config_class",
    "edge_vector_store_config",
]

PROVIDER = "agentscope_edge"
"""The vector-store provider name this package registers with mem0."""


class EdgeStoreConfig(FusionSettings):
    """The ``vector_store.config`` of the Qdrant Edge provider."""

    model_config = ConfigDict(extra="forbid")

    collection_name: str = Field("agentscope_mem0", description="Collection (shard) name")
    embedding_model_dims: int | None = Field(None, description="Dense vector size")
    path: str = Field(description="Folder holding one shard folder per collection")


def edge_vector_store_config(
    *,
    path: str | os.PathLike[str],
    dims: int,
    collection_name: str = "agentscope_mem0",
    fusion: Fusion = "rrf",
    **options: Any,
) -> Any:
    """A mem0 ``VectorStoreConfig`` for the Qdrant Edge store, registering the provider.

    Args:
        path: The folder holding the collections' shard folders.
        dims: The embedding model's vector size.
        collection_name: The collection.
        fusion: ``"rrf"``, ``"dbsf"`` or ``"none"`` (see :mod:`._edge_provider`).
        **options: Further :class:`EdgeStoreConfig` fields.

    Returns:
        A ``VectorStoreConfig`` (a subclass accepting only :data:`PROVIDER`).
    """
    config_class = edge_config_class()
    store = EdgeStoreConfig(
        path=os.fspath(path),
        embedding_model_dims=dims,
        collection_name=collection_name,
        fusion=fusion,
        **options,
    )
    return config_class(provider=PROVIDER, config=store.model_dump())


_config_class: type | None = None


def edge_config_class() -> type:
    """``VectorStoreConfig`` subclass that accepts :data:`PROVIDER` and nothing else."""
    global _config_class
    if _config_class is not None:
        return _config_class
    from mem0.utils.factory import VectorStoreFactory
    from mem0.vector_stores.configs import VectorStoreConfig
    from pydantic import model_validator

    class EdgeVectorStoreConfig(VectorStoreConfig):
        @model_validator(mode="after")
        def validate_and_create_config(self) -> EdgeVectorStoreConfig:
            if self.provider != PROVIDER:
                raise ValueError(f"Unsupported vector store provider: {self.provider}")
            given: Any = getattr(self, "config", None)
            if not isinstance(given, EdgeStoreConfig):
                if not isinstance(given, dict) or "path" not in given:
                    raise ValueError(
                        f"the {PROVIDER} vector store needs a config with a 'path' "
                        "(the folder its collections live in)"
                    )
                setattr(self, "config", EdgeStoreConfig(**given))  # noqa: B010
            return self

    VectorStoreFactory.provider_to_class[PROVIDER] = f"{__package__}._edge_provider.EdgeVectorStore"
    _config_class = EdgeVectorStoreConfig
    return _config_class
