"""A real PostgreSQL with pgvector for the tests, started here unless CI gave one.

``.ci/run`` starts one server for the whole run and exports its URI as
``AGENTSCOPE_MEM0_TEST_PG_DSN``; without it, :func:`postgres_dsn` starts a
throwaway server from the ``pgserver`` wheel (PostgreSQL 16 + pgvector 0.6.2)
in a temporary folder and deletes it afterwards. Tests keep apart by using
their own table (see :func:`fresh_collection`).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

DSN_ENV = "AGENTSCOPE_MEM0_TEST_PG_DSN"
"""Environment variable holding the URI of an already running server."""


@contextmanager
def postgres_dsn() -> Iterator[str]:
    """The URI of a PostgreSQL server with the pgvector extension available.

    Skips the calling tests when no server was given and ``pgserver`` or
    ``psycopg`` (the ``pgvector`` extra) is not installed.
    """
    pytest.importorskip(
        "psycopg", reason="pgvector tests need psycopg 3: pip install 'agentscope-mem0[pgvector]'"
    )
    given = os.environ.get(DSN_ENV)
    if given:
        yield given
        return
    pgserver = pytest.importorskip(
        "pgserver",
        reason=f"no PostgreSQL for the pgvector tests: set {DSN_ENV} or pip install pgserver",
    )
    # pgserver runs the server as an OS user of its own when we are root, so
    # the folder must live where that user can reach it: under /tmp, not $HOME.
    folder = tempfile.mkdtemp(prefix="asm0-pg-")
    server = pgserver.get_server(folder, cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def fresh_collection(prefix: str = "t") -> str:
    """A table name no other test uses."""
    return f"{prefix}_{uuid.uuid4().hex[:12]}"
