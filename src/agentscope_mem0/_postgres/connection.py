"""One PostgreSQL connection owned under a lock, its tables created once.

:class:`PostgresTables` is what mem0's history, the token totals and working
memory keep in the store's database: a psycopg connection (imported lazily:
the ``pgvector`` extra) opened on first use, its ``CREATE ... IF NOT EXISTS`` statements run
under an advisory lock (they race between processes starting together), one
transaction per call, and one reconnection when the server dropped the
connection (a restart, a failover). Every statement waits at most
``timeout`` for a lock (``lock_timeout``), so a row held elsewhere fails the
call instead of hanging it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from .._exceptions import ConfigurationError

__all__ = ["PostgresTables", "mask_url", "pgvector_dsn", "psycopg_for"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_SCHEMA_LOCK = "agentscope_mem0:schema"
"""The advisory lock (by ``hashtext``) every schema change of this package takes."""


def mask_url(url: str) -> str:
    """``url`` (a URL or a libpq ``key=value`` string) with any password shown as
    ``***``, for messages and reports."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "***"
    if parts.password is None:
        if "password=" in url:  # libpq key=value form
            return " ".join("password=***" if p.startswith("password=") else p for p in url.split())
        return url
    netloc = parts.netloc.rsplit("@", 1)
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[-1]}"))


def psycopg_for(what: str) -> Any:
    """The ``psycopg`` module, or a :class:`ConfigurationError` saying that
    ``what`` needs it and which extra installs it."""
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigurationError(
            f"{what} needs psycopg 3: pip install 'agentscope-mem0[pgvector]' "
            "(or 'psycopg[binary]' psycopg-pool)"
        ) from exc
    return psycopg


def pgvector_dsn(settings: Any) -> str | None:
    """The libpq connection string of mem0's pgvector config, or ``None``.

    ``None`` when the config connects through a ``connection_pool`` it was
    handed: there is no string to open another connection with.
    """
    dsn = getattr(settings, "connection_string", None)
    if dsn:
        return str(dsn)
    if getattr(settings, "connection_pool", None) is not None:
        return None
    from psycopg.conninfo import make_conninfo

    names = ("dbname", "user", "password", "host", "port", "sslmode")
    parts = {name: getattr(settings, name, None) for name in names}
    return str(make_conninfo("", **{k: v for k, v in parts.items() if v is not None}))


class PostgresTables:
    """A connection to ``dsn`` with ``schema`` created on first use. Thread-safe.

    Args:
        dsn: A libpq connection string.
        schema: ``CREATE ... IF NOT EXISTS`` statements, run once per connection.
        timeout: Seconds to wait for the connection and for a lock.
    """

    def __init__(self, dsn: str, schema: Sequence[str], *, timeout: float = 10.0) -> None:
        self.dsn = dsn
        self.schema = tuple(schema)
        self.timeout = timeout
        self._conn: Any = None
        self._lock = threading.Lock()

    def run(self, work: Callable[[Any], T]) -> T:
        """``work(connection)`` in one transaction, committed when it returns.

        Raises:
            ConfigurationError: psycopg is not installed.
            psycopg.Error: What PostgreSQL raised (a dropped connection is
                reopened once first).
        """
        import psycopg

        with self._lock:
            for attempt in (1, 2):
                conn = self._connection()
                try:
                    with conn.transaction():
                        return work(conn)
                except psycopg.OperationalError:
                    broken = conn.broken
                    conn.close()
                    self._conn = None
                    if attempt == 2 or not broken:
                        raise
                    logger.info("PostgreSQL dropped the connection; reconnecting once")
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close the connection. Idempotent."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _connection(self) -> Any:
        psycopg = psycopg_for("keeping rows in PostgreSQL")
        if self._conn is not None and not self._conn.closed:
            return self._conn
        conn = psycopg.connect(self.dsn, connect_timeout=max(1, int(self.timeout)), autocommit=True)
        try:
            with conn.transaction():
                conn.execute(
                    "SELECT set_config('lock_timeout', %s, false)",
                    (f"{int(self.timeout * 1000)}ms",),
                )
                conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (_SCHEMA_LOCK,))
                for statement in self.schema:
                    conn.execute(statement)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn
