"""What the commands do with memories on the hosted mem0 platform.

Everything goes through :class:`~agentscope_mem0._mem0.backend.Mem0Backend`, so
the platform's scoping rule applies here as in the middleware: the platform
files a user's messages under ``user_id`` alone (``agent_id`` null) and a
read naming both ids finds nothing, so reads of a user and agent name the
user only and show what that agent reads. Ids and dates are the platform's
own, so memories cannot be imported with their ids.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from .._mem0.backend import Mem0Backend
from ._models import ChatChoice
from ._records import MemoryRecord
from ._store import Mem0Calls, UnsupportedError

if TYPE_CHECKING:
    from .._scope import Scope
    from ._config import Settings

__all__ = ["HostedStore"]

_PAGE_SIZE = 100

_NO_HOSTED_IMPORT = (
    "import into the hosted mem0 platform is not supported: the platform assigns its "
    "own ids and dates, so an exact and idempotent import is impossible. Import into "
    "an open-source backend (embedded, pgvector, qdrant) instead"
)

AGENT_NOTE = (
    "the hosted platform files a user's memories without the agent's id, so --agent "
    "does not narrow them: these are the user's memories, which agent {agent!r} reads"
)
"""What list/search say when ``--agent`` is given on the platform."""


class HostedStore(Mem0Calls):
    """The hosted mem0 platform (``AsyncMemoryClient``), through mem0's API only."""

    hosted = True
    embedding_model = None

    def __init__(self, client: Any, *, settings: Settings, chat: ChatChoice | None = None) -> None:
        self.memory = client
        self.backend = Mem0Backend(client)
        self.settings = settings
        self.chat = chat

    async def records(self, scope: Scope | None) -> list[MemoryRecord]:
        """Every memory of ``scope``, oldest first (``scope`` is required here)."""
        if scope is None:
            raise UnsupportedError(
                "the hosted platform lists memories per user: export with --user"
            )
        found: list[MemoryRecord] = []
        page = 1
        while True:
            items, more = await self.backend.get_page(scope, page=page, page_size=_PAGE_SIZE)
            found.extend(MemoryRecord.from_result(i) for i in items)
            if not more or not items:
                break
            page += 1
        return sorted(found, key=lambda r: (r.created_at or "", r.id))

    async def get(self, memory_id: str) -> MemoryRecord | None:
        """One memory by id, or ``None``."""
        raw = await self.backend.get(memory_id)
        return None if raw is None else MemoryRecord.from_result(raw)

    async def delete_scope(self, scope: Scope, records: Sequence[MemoryRecord]) -> None:
        """Delete the memories a read of ``scope`` lists (``records``)."""
        if scope.agent_id is None:
            await self.backend.delete_all(scope)
            return
        # A delete_all naming user and agent matches nothing in the user's space;
        # delete what the listing showed instead.
        for record in records:
            await self.backend.delete(record.id)

    async def existing_ids(self, ids: Sequence[str]) -> set[str]:
        """Not available: imports need an open-source store."""
        raise UnsupportedError(_NO_HOSTED_IMPORT)

    async def insert(self, records: Sequence[MemoryRecord]) -> None:
        """Not available: imports need an open-source store."""
        raise UnsupportedError(_NO_HOSTED_IMPORT)

    async def ensure_history(self, records: Sequence[MemoryRecord]) -> None:
        """Not available: imports need an open-source store."""
        raise UnsupportedError(_NO_HOSTED_IMPORT)

    async def purge_history(self, ids: Iterable[str]) -> int:
        """The platform keeps its own history; nothing to purge here."""
        return 0

    async def purge_messages(self, scope: Scope) -> int:
        """The platform keeps its own messages; nothing to purge here."""
        return 0

    def vector_size(self) -> int | None:
        """Unknown: the platform embeds on its side."""
        return None

    def close(self) -> None:
        """Nothing to release."""
