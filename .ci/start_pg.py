#!/usr/bin/env python
"""Start a local PostgreSQL 16 with pgvector for the tests, and print its URI.

Uses the ``pgserver`` wheel (PostgreSQL and pgvector binaries inside; no
network, no Docker). The server listens on a Unix socket in the data folder
only and keeps running after this script exits::

    eval "$(python .ci/start_pg.py)"      # exports AGENTSCOPE_MEM0_TEST_PG_DSN
    python -m pytest tests/test_pgvector.py
    python .ci/start_pg.py --stop

As root, pgserver runs the server as an OS user ``pgserver``, so the folder
must be reachable by that user (the default under /tmp is).
"""

from __future__ import annotations

import argparse
import logging
import shlex
import sys
import time
from pathlib import Path

DSN_ENV = "AGENTSCOPE_MEM0_TEST_PG_DSN"
DEFAULT_FOLDER = Path("/tmp/agentscope-mem0-ci-pg")


def start(folder: Path) -> str:
    """Start (or reuse) the server in ``folder``; returns its URI."""
    import pgserver
    import psycopg

    folder.parent.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    # cleanup_mode=None: the server outlives this process; --stop ends it.
    server = pgserver.get_server(folder, cleanup_mode=None)
    uri = server.get_uri()
    with psycopg.connect(uri, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        (version,) = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
    print(
        f"PostgreSQL with pgvector {version} ready in {time.perf_counter() - started:.1f} s "
        f"at {uri}",
        file=sys.stderr,
    )
    return uri


def stop(folder: Path) -> None:
    """Stop the server in ``folder`` (and delete the folder)."""
    import pgserver

    if not (folder / "PG_VERSION").exists():
        print(f"no server in {folder}", file=sys.stderr)
        return
    pgserver.get_server(folder, cleanup_mode="delete").cleanup()
    print(f"stopped the server in {folder}", file=sys.stderr)


def main() -> int:
    """``start`` (default) prints ``export AGENTSCOPE_MEM0_TEST_PG_DSN=...``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=DEFAULT_FOLDER)
    parser.add_argument("--stop", action="store_true", help="stop the server and delete it")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING)
    folder = args.folder.expanduser().resolve()
    if args.stop:
        stop(folder)
        return 0
    try:
        uri = start(folder)
    except ImportError as exc:
        print(
            f"cannot start PostgreSQL: {exc}; pip install pgserver 'psycopg[binary]'",
            file=sys.stderr,
        )
        return 1
    print(f"export {DSN_ENV}={shlex.quote(uri)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
