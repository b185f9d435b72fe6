"""What memory costs in model tokens: extraction and judgement, in and out, per write.

:class:`TokenMeter` adds up the tokens of every model call made for memory,
by kind (``extraction``: mem0's extraction calls; ``judge``: the time
judgement's; ``profile``: the profile's refreshes) and counts the writes
they were made for, so ``stats()`` can say what one write costs. A model
that reports usage (AgentScope's ``ChatResponse.usage``) is believed; for
one that does not, the tokens are estimated (:func:`estimate_tokens`, which
errs high) and the calls counted as estimated.

The totals are also kept where ``agentscope-mem0 status`` can read them from
another process: in ``usage.sqlite3`` next to the write outbox, or, when
mem0's history lives in PostgreSQL (a pgvector store, see
:mod:`agentscope_mem0._postgres.history`), in that database's
``agentscope_mem0_usage`` table, where every replica adds to one set of
totals. Which meter and kind a model call counts on travels with the call
(see :func:`agentscope_mem0._mem0.call_context.metered`).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from .._postgres.connection import PostgresTables
from .._sqlite.wal import enable_wal
from .._text.tokens import estimate_tokens

__all__ = [
    "USAGE_FILENAME",
    "USAGE_TABLE",
    "CallTokens",
    "Kind",
    "TokenMeter",
    "read_postgres_usage",
    "read_usage",
]

logger = logging.getLogger(__name__)

USAGE_FILENAME = "usage.sqlite3"
"""The file beside the outbox that keeps the token totals."""
USAGE_TABLE = "agentscope_mem0_usage"
"""The PostgreSQL table that keeps them, one row per collection and kind."""

Kind = Literal["extraction", "judge", "profile"]
KINDS: tuple[Kind, ...] = ("extraction", "judge", "profile")
_FIELDS = ("calls", "writes", "input_tokens", "output_tokens", "estimated_calls")

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS usage (kind TEXT PRIMARY KEY, calls INTEGER NOT NULL, "
    "writes INTEGER NOT NULL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL, "
    "estimated_calls INTEGER NOT NULL, since REAL NOT NULL, updated REAL NOT NULL)"
)
_PG_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {USAGE_TABLE} (collection text NOT NULL, kind text NOT NULL, "
    "calls bigint NOT NULL, writes bigint NOT NULL, input_tokens bigint NOT NULL, "
    "output_tokens bigint NOT NULL, estimated_calls bigint NOT NULL, "
    "since double precision NOT NULL, updated double precision NOT NULL, "
    "PRIMARY KEY (collection, kind))",
)
# Seconds the totals' thread waits for the server, and between tries while it
# is away; nobody else waits for it (totals are a report, not a write).
_PG_TIMEOUT = 5.0


@dataclass(frozen=True)
class CallTokens:
    """The tokens of one model call."""

    input_tokens: int
    output_tokens: int
    estimated: bool
    """The model reported no usage; these are :func:`estimate_tokens` figures."""

    @classmethod
    def of(cls, usage: Any, prompt: str, answer: str) -> CallTokens:
        """The tokens of one call: as reported, else estimated.

        Args:
            usage: The response's ``ChatUsage`` (``input_tokens``/``output_tokens``), or ``None``.
            prompt: The prompt's text, estimated when ``usage`` is missing.
            answer: The answer's text, likewise.
        """
        reported_in = getattr(usage, "input_tokens", None)
        reported_out = getattr(usage, "output_tokens", None)
        if isinstance(reported_in, int) and isinstance(reported_out, int):
            return cls(reported_in, reported_out, estimated=False)
        return cls(estimate_tokens(prompt), estimate_tokens(answer), estimated=True)


class _TotalsStore(Protocol):
    """Where a meter keeps its totals for other processes to read."""

    where: str

    def add(self, kind: str, change: dict[str, int]) -> None: ...

    def close(self) -> None: ...


class _SqliteTotals:
    """The totals in ``usage.sqlite3`` (one process's, beside its outbox)."""

    def __init__(self, path: Path) -> None:
        self.where = str(path)
        self._db = _open(path)

    def add(self, kind: str, change: dict[str, int]) -> None:
        _store(self._db, kind, change)

    def close(self) -> None:
        self._db.close()


class _PostgresTotals:
    """The totals in PostgreSQL, one row per collection and kind, added to by every replica.

    ``add`` is called on the event loop's thread too (after a write), so it
    only merges the change into what is pending; a named daemon thread adds
    what is pending to the table, one upsert per kind for all the changes
    meanwhile. What a failed upsert held stays pending until the server
    answers again; :meth:`close` writes the rest (within ``_PG_TIMEOUT``).
    """

    def __init__(self, dsn: str, collection: str) -> None:
        self.where = f"PostgreSQL table {USAGE_TABLE}"
        self.collection = collection
        self._tables = PostgresTables(dsn, _PG_SCHEMA, timeout=_PG_TIMEOUT)
        self._pending: dict[str, dict[str, int]] = {}
        self._since = 0.0
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closing = False
        self._failing = False
        self._thread = threading.Thread(
            target=self._run, name="agentscope-mem0-token-totals", daemon=True
        )
        self._thread.start()

    def add(self, kind: str, change: dict[str, int]) -> None:
        with self._lock:
            pending = self._pending.setdefault(kind, dict.fromkeys(_FIELDS, 0))
            for name, value in change.items():
                pending[name] += value
            self._since = self._since or time.time()
        self._wake.set()

    def _run(self) -> None:
        retry = False
        while not self._closing:
            # After a failure, try again within _PG_TIMEOUT even if nothing new comes.
            self._wake.wait(_PG_TIMEOUT if retry else None)
            self._wake.clear()
            retry = not self._write_pending()

    def _write_pending(self) -> bool:
        """Add what is pending to the table; ``False`` (and kept pending) if that failed."""
        with self._lock:
            taken, since = self._pending, self._since
            self._pending, self._since = {}, 0.0
        if not taken:
            return True
        try:
            self._tables.run(lambda conn: self._upsert(conn, taken, since))
        except Exception as exc:  # a report: logged once per episode, retried
            with self._lock:
                for kind, change in taken.items():
                    pending = self._pending.setdefault(kind, dict.fromkeys(_FIELDS, 0))
                    for name, value in change.items():
                        pending[name] += value
                self._since = min(filter(None, (self._since, since)), default=since)
            if not self._failing:
                logger.warning(
                    "could not add token totals to %s (%s); kept in memory until it works",
                    self.where,
                    exc,
                )
            self._failing = True
            return False
        if self._failing:
            logger.info("token totals are added to %s again", self.where)
        self._failing = False
        return True

    def _upsert(self, conn: Any, taken: dict[str, dict[str, int]], since: float) -> None:
        now = time.time()
        for kind, change in taken.items():
            conn.execute(
                f"INSERT INTO {USAGE_TABLE} (collection, kind, {', '.join(_FIELDS)}, since, "
                "updated) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s) "
                "ON CONFLICT (collection, kind) DO UPDATE SET "
                + ", ".join(f"{name} = {USAGE_TABLE}.{name} + excluded.{name}" for name in _FIELDS)
                + ", updated = excluded.updated",
                (self.collection, kind, *(change[name] for name in _FIELDS), since or now, now),
            )

    def close(self) -> None:
        self._closing = True
        self._wake.set()
        self._thread.join(_PG_TIMEOUT * 2)
        if not self._write_pending():
            logger.warning("token totals not yet in %s are lost at close", self.where)
        self._tables.close()


class TokenMeter:
    """Totals of the model tokens spent on memory, by kind. Thread-safe.

    Args:
        path: The SQLite file to keep the totals in as well; ``None``: in memory only.
        postgres: ``(dsn, collection)``: keep them in that database's
            ``agentscope_mem0_usage`` table instead, under that collection.
    """

    def __init__(
        self, path: Path | None = None, *, postgres: tuple[str, str] | None = None
    ) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._totals: dict[str, dict[str, int]] = {k: dict.fromkeys(_FIELDS, 0) for k in KINDS}
        self._store: _TotalsStore | None = None
        self._failing = False
        if postgres is not None:
            self._store = _PostgresTotals(*postgres)
        elif path is not None:
            try:
                self._store = _SqliteTotals(path)
            except sqlite3.Error as exc:
                logger.warning("token totals stay in memory: cannot open %s (%s)", path, exc)

    @classmethod
    def beside(cls, outbox_path: Path | None) -> TokenMeter:
        """A meter keeping its file in the outbox's folder (in memory for an in-memory outbox)."""
        return cls(outbox_path.with_name(USAGE_FILENAME) if outbox_path is not None else None)

    @classmethod
    def for_client(cls, client: Any, outbox_path: Path | None) -> TokenMeter:
        """A meter keeping its totals where ``client`` keeps mem0's history, if that
        is PostgreSQL; otherwise :meth:`beside` the outbox."""
        from .._postgres.history import PostgresHistory

        history = getattr(client, "db", None)
        if isinstance(history, PostgresHistory):
            return cls(postgres=(history.dsn, history.collection))
        return cls.beside(outbox_path)

    @property
    def where(self) -> str | None:
        """Where the totals are kept for other processes; ``None``: in memory only."""
        return self._store.where if self._store is not None else None

    def add(self, kind: Kind, tokens: CallTokens | None = None, *, writes: int = 0) -> None:
        """Count one call's ``tokens`` (if given) and ``writes`` under ``kind``."""
        change = dict.fromkeys(_FIELDS, 0)
        change["writes"] = writes
        if tokens is not None:
            change.update(
                calls=1,
                input_tokens=tokens.input_tokens,
                output_tokens=tokens.output_tokens,
                estimated_calls=int(tokens.estimated),
            )
        with self._lock:
            for name, value in change.items():
                self._totals[kind][name] += value
            if self._store is not None:
                try:
                    self._store.add(kind, change)
                # Totals are a report: whatever the file or server raised, the
                # write they count goes on.
                except Exception as exc:
                    if not self._failing:  # once per episode, not once per write
                        logger.warning(
                            "could not keep token totals in %s (%s); they are counted in "
                            "memory, and %s misses them until it works again",
                            self._store.where,
                            exc,
                            self._store.where,
                        )
                    self._failing = True
                else:
                    if self._failing:
                        logger.info("token totals are kept in %s again", self._store.where)
                    self._failing = False

    def stats(self) -> dict[str, Any]:
        """``tokens_*`` totals and the mean per write (extraction and judgement together).

        ``tokens_in_<kind>`` / ``tokens_out_<kind>``, ``model_calls_<kind>``,
        ``tokens_writes`` (exchanges extracted), ``tokens_in_per_write`` /
        ``tokens_out_per_write`` and ``tokens_estimated_calls`` (calls of a
        model that reported no usage).
        """
        with self._lock:
            totals = {kind: dict(values) for kind, values in self._totals.items()}
        return usage_stats(totals)

    def close(self) -> None:
        """Close the file or connection. Idempotent."""
        with self._lock:
            if self._store is not None:
                self._store.close()
                self._store = None


def usage_stats(totals: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """The ``stats()`` keys of per-kind totals."""
    out: dict[str, Any] = {}
    for kind in KINDS:
        values = totals.get(kind, {})
        out[f"tokens_in_{kind}"] = values.get("input_tokens", 0)
        out[f"tokens_out_{kind}"] = values.get("output_tokens", 0)
        out[f"model_calls_{kind}"] = values.get("calls", 0)
    writes = totals.get("extraction", {}).get("writes", 0)
    out["tokens_writes"] = writes
    for way in ("in", "out"):
        spent = sum(out[f"tokens_{way}_{kind}"] for kind in KINDS)
        out[f"tokens_{way}_per_write"] = round(spent / writes, 1) if writes else None
    out["tokens_estimated_calls"] = sum(totals.get(k, {}).get("estimated_calls", 0) for k in KINDS)
    return out


def _open(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(str(path), timeout=5.0, isolation_level=None, check_same_thread=False)
    enable_wal(db, 5.0)
    db.execute("PRAGMA synchronous = NORMAL")  # totals, not writes: no fsync per call
    db.execute(_SCHEMA)
    return db


def _store(db: sqlite3.Connection, kind: str, change: dict[str, int]) -> None:
    now = time.time()
    db.execute(
        f"INSERT INTO usage (kind, {', '.join(_FIELDS)}, since, updated) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(kind) DO UPDATE SET "
        + ", ".join(f"{name} = {name} + excluded.{name}" for name in _FIELDS)
        + ", updated = excluded.updated",
        (kind, *(change[name] for name in _FIELDS), now, now),
    )


def read_usage(folder: Path) -> dict[str, Any] | None:
    """The token totals kept in ``folder``: the ``stats()`` keys plus ``since``
    (ISO 8601, the first call counted), or ``None`` when none were kept."""
    path = folder / USAGE_FILENAME
    if not path.exists():
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
    try:
        rows = db.execute(
            "SELECT kind, calls, writes, input_tokens, output_tokens, estimated_calls, since "
            "FROM usage"
        ).fetchall()
    except sqlite3.Error:
        return None
    finally:
        db.close()
    return _report(rows)


def read_postgres_usage(dsn: str, collection: str) -> dict[str, Any] | None:
    """The token totals every replica on ``collection`` added up in PostgreSQL, as
    :func:`read_usage` gives them; ``None`` when none were kept or the server
    cannot be read."""
    import psycopg

    try:
        with psycopg.connect(dsn, connect_timeout=int(_PG_TIMEOUT)) as conn:
            if conn.execute("SELECT to_regclass(%s)", (USAGE_TABLE,)).fetchone() == (None,):
                return None
            rows = conn.execute(
                "SELECT kind, calls, writes, input_tokens, output_tokens, estimated_calls, "
                f"since FROM {USAGE_TABLE} WHERE collection = %s",
                (collection,),
            ).fetchall()
    except psycopg.Error as exc:
        logger.warning("cannot read the token totals in PostgreSQL: %s", exc)
        return None
    return _report(rows) if rows else None


def _report(rows: list[Any]) -> dict[str, Any]:
    totals = {row[0]: dict(zip(_FIELDS, (int(v) for v in row[1:6]), strict=True)) for row in rows}
    out = usage_stats(totals)
    since = min((row[6] for row in rows), default=None)
    out["since"] = datetime.fromtimestamp(since, UTC).isoformat() if since else None
    return out
