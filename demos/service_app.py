"""An ``agentscope.app`` service whose agents remember each user, runnable offline.

    pip install -e ".[local,service]"
    uvicorn demos.service_app:app --port 8000        # from the repository root
    python demos/service_client.py --url http://127.0.0.1:8000

What it wires (see docs/deploying.md):

* the app's storage, message bus and workspaces, in one folder
  (``$SERVICE_APP_DIR``, default ``<tmp>/agentscope-mem0-service``);
* ``mem0_middleware_factory`` on the embedded store in that folder's
  ``memory/`` (offline embedder, no server), installed on the app's lifespan;
  or, when ``$AGENTSCOPE_MEM0_PG_DSN`` names a PostgreSQL database with
  pgvector, on that database, so that several workers or replicas share the
  memories, mem0's history and the token totals
  (``docker/replicas-compose.yml`` runs two of them); with
  ``$AGENTSCOPE_MEM0_DELIVER_WRITES=0`` a replica only records its writes and
  ``demos/service_writer.py`` stores them;
* the model mem0 extracts with: DashScope when ``DASHSCOPE_API_KEY`` is set,
  an OpenAI-compatible server with ``OPENAI_API_KEY`` / ``OPENAI_BASE_URL``,
  otherwise the offline rule-based extractor;
* a credential type ``offline_scripted`` for the app's agents: a scripted chat
  model that needs no key and answers from the memory note, so the whole
  service runs without network. With a key, clients can create a real
  credential (``dashscope_credential``, ``openai_credential``) instead.
* the memory inspector at ``/memory-inspector/`` (``mount_inspector``), served
  by the app itself on its own client (``ui`` cannot open a folder the app
  holds); without a token it answers requests from this machine only (a
  loopback peer), so behind a proxy give it one in
  ``$AGENTSCOPE_MEM0_UI_TOKEN`` (16 characters or more). On PostgreSQL
  ``agentscope-mem0 ui --config FILE`` serves it instead, beside the replicas;
* ``POST /memory/flush``: waits until the writes queued so far are stored. A
  demo convenience (a real service would not expose it): the client calls it
  between a user's two sessions.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, Literal

from agentscope.app import create_app
from agentscope.app.message_bus import InMemoryMessageBus
from agentscope.app.storage import AsyncSQLAlchemyStorage
from agentscope.app.workspace_manager import IsolationPolicy, LocalWorkspaceManager
from agentscope.credential import CredentialBase
from agentscope.message import HintBlock, Msg
from agentscope.model import ChatModelBase
from demos._shared_memory import DELIVER_ENV, PG_DSN_ENV, shared_memory

from agentscope_mem0.demo import chat_model_from_env
from agentscope_mem0.service import mem0_middleware_factory
from agentscope_mem0.testing import ScriptedChatModel

FOLDER = Path(
    os.environ.get("SERVICE_APP_DIR") or Path(tempfile.gettempdir()) / "agentscope-mem0-service"
)
OFFLINE_TYPE = "offline_scripted"


def answer_from_memory(messages: list[Msg], tools: Any) -> str:
    """The offline agent model: repeats what the memory note recalls, if anything."""
    recalled = [
        line[2:].split("] ", 1)[-1]
        for msg in messages
        for block in msg.content
        if isinstance(block, HintBlock) and isinstance(block.hint, str)
        for line in block.hint.splitlines()
        if line.startswith("- ")
    ]
    return "I remember: " + " ".join(recalled) if recalled else "Noted; nothing recalled yet."


class OfflineChatModel(ScriptedChatModel):
    """The scripted model, built the way agentscope.app builds models: from a credential."""

    def __init__(
        self,
        credential: CredentialBase | None = None,
        model: str = "scripted",
        parameters: ChatModelBase.Parameters | None = None,
        **_: Any,
    ) -> None:
        super().__init__(answer_from_memory, name=model)


class OfflineCredential(CredentialBase):
    """A credential that needs no key: its chat model is :class:`OfflineChatModel`."""

    type: Literal["offline_scripted"] = "offline_scripted"

    @classmethod
    def get_chat_model_class(cls) -> type[ChatModelBase]:
        """The model class agentscope.app builds for a session using this credential."""
        return OfflineChatModel


def build_app(folder: Path = FOLDER) -> Any:
    """The ASGI app, with its state and memories in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    extraction_model, described = chat_model_from_env()
    dsn = os.environ.get(PG_DSN_ENV)
    if dsn:
        deliver = os.environ.get(DELIVER_ENV, "1").strip().lower() not in ("0", "false", "no")
        memory = shared_memory(dsn, extraction_model, deliver_writes=deliver)
    else:
        memory = mem0_middleware_factory(
            chat_model=extraction_model,  # the embedded default embeds offline: no embedding_model
            folder=folder / "memory",
            mode="static_control",
        )
    service = create_app(
        storage=AsyncSQLAlchemyStorage(f"sqlite+aiosqlite:///{folder / 'app.db'}"),
        message_bus=InMemoryMessageBus(),
        # one workspace per session, so that a user can open a second session
        workspace_manager=LocalWorkspaceManager(
            str(folder / "workspaces"), isolation=IsolationPolicy.PER_SESSION
        ),
        enable_scheduler=False,
        enable_channel_worker=False,
        enable_index_worker=False,
        extra_credentials=[OfflineCredential],
        extra_agent_middlewares=memory,
    )
    memory.install(service)  # builds the mem0 client at startup, stores pending writes at shutdown
    if not dsn:
        # http://127.0.0.1:8000/memory-inspector/; without $AGENTSCOPE_MEM0_UI_TOKEN it
        # answers loopback peers only (this machine, not through a proxy or a container
        # port). On PostgreSQL, `agentscope-mem0 ui --config FILE` serves it instead,
        # from any machine that reaches the database.
        memory.mount_inspector(service)

    @service.post("/memory/flush")
    async def flush(timeout: float = 30.0) -> dict[str, Any]:
        """Wait until the writes queued so far are stored (demo only)."""
        return {"stored": await memory.flush(timeout), "extraction_model": described}

    return service


app = build_app()
