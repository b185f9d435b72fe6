"""The memory of the demo's replicas and of their writer process, on PostgreSQL.

``demos/service_app.py`` (each replica) and ``demos/service_writer.py`` (the
writer) build it alike: the same store, models and options, so that what a
replica records the writer stores as the replica would have.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentscope_mem0 import Mem0Middleware
from agentscope_mem0.backends import pgvector_config, prepare_pgvector
from agentscope_mem0.local import default_embedding_model
from agentscope_mem0.service import Mem0MiddlewareFactory, mem0_middleware_factory

if TYPE_CHECKING:
    from agentscope.model import ChatModelBase

PG_DSN_ENV = "AGENTSCOPE_MEM0_PG_DSN"
"""Names the PostgreSQL database every replica shares; unset: the embedded folder."""
DELIVER_ENV = "AGENTSCOPE_MEM0_DELIVER_WRITES"
"""``0``: a replica only records its writes; the writer process stores them."""


def shared_memory(
    dsn: str, extraction_model: ChatModelBase, *, deliver_writes: bool = True
) -> Mem0MiddlewareFactory:
    """The factory of a replica (or, delivering, of the writer process):
    memories, history, token totals and the write outbox in PostgreSQL."""
    embedding_model = default_embedding_model()  # offline; any AgentScope embedder works
    config = pgvector_config(dsn, dims=embedding_model.dimensions)
    prepare_pgvector(config)  # replicas starting together: the schema is made once, under a lock
    return mem0_middleware_factory(
        chat_model=extraction_model,
        embedding_model=embedding_model,
        mem0_config=config,
        mode="static_control",
        # This demo keeps agentscope.app's own state (agents, sessions) per
        # replica, so one agent has another id on each; scope by its name,
        # which is the same. With shared app storage the default (the id) fits.
        agent_id=None,
        parameters=Mem0Middleware.Parameters(deliver_writes=deliver_writes),
    )
