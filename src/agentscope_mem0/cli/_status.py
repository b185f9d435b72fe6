"""``status``: is everything in order? (What it gathers: :mod:`._probes`.)"""

from __future__ import annotations

from typing import Any

import click

from ._common import store_command
from ._config import Settings
from ._errors import ExitCode
from ._lock import LockHolder
from ._output import Output, short_date
from ._probes import gather_status

__all__ = ["status"]


def _exit_code(report: dict[str, Any]) -> ExitCode:
    if not report["backend"]["reachable"]:
        return ExitCode.UNAVAILABLE
    vectors = report["vectors"]
    if vectors.get("match") is False or vectors.get("error"):
        return ExitCode.USAGE
    return ExitCode.OK


def _print_status(out: Output, report: dict[str, Any]) -> None:
    settings, sources = report["settings"], report["sources"]
    out.line("Configuration")
    labels = {
        "backend": "backend",
        "folder": "data folder",
        "config_file": "config file",
        "collection": "collection",
        "dsn": "dsn",
        "url": "url",
        "api_key": "api key",
        "history_db": "history db",
        "embedding_model": "embedding model",
        "chat_model": "chat model",
        "outbox": "outbox folder",
    }
    pairs = []
    for key, label in labels.items():
        if key in settings:
            source = sources.get(key)
            pairs.append((label, f"{settings[key]}" + (f"  ({source})" if source else "")))
    out.fields(pairs, indent=2)

    backend = report["backend"]
    out.line("Backend")
    lock = "free"
    if backend.get("locked"):
        holder = backend.get("lock_holder")
        lock = (
            f"LOCKED by {LockHolder(holder['pid'], holder['command']).describe()}; stop that "
            "process or use another --folder"
            if holder
            else "LOCKED by another process (holder unknown)"
        )
    if backend["reachable"]:
        reachable = "yes"
    elif backend.get("locked"):
        reachable = "NO: the folder is locked by another process (see below)"
    else:
        reachable = f"NO: {backend.get('error', 'unknown')}"
    pairs = [("store", backend["store"]), ("reachable", reachable)]
    if "locked" in backend:
        pairs.append(("folder lock", lock))
    if backend.get("memories") is not None:
        pairs.append(("memories", backend["memories"]))
    if backend.get("engine"):
        pairs.append(("engine", backend["engine"]))
    if backend.get("index"):
        pairs.append(("index", _index_line(backend)))
    if backend.get("note"):
        pairs.append(("note", backend["note"]))
    out.fields(pairs, indent=2)

    vectors = report["vectors"]
    out.line("Vectors")
    if vectors.get("note"):
        out.fields([("note", vectors["note"])], indent=2)
    else:
        embedder = (
            f"{vectors['embedder']} dimensions ({vectors.get('embedder_name')})"
            if vectors["embedder"] is not None
            else f"unavailable: {vectors.get('error')}"
        )
        store = vectors["store"]
        verdict = {True: "match", False: "MISMATCH", None: "-"}[vectors["match"]]
        out.fields(
            [
                ("store", f"{store} dimensions" if store is not None else "unknown / empty"),
                ("embedder", embedder),
                ("check", verdict),
            ],
            indent=2,
        )

    telemetry = report["telemetry"]
    out.line(f"Telemetry: {'on' if telemetry['enabled'] else 'off'} ({telemetry['source']})")

    _print_tokens(out, report.get("tokens"))

    outbox = report["outbox"]
    out.line("Write outbox")
    if not outbox["exists"]:
        out.fields([("file", f"{outbox['path']} (none yet: no queued writes)")], indent=2)
        return
    hint = "  (agentscope-mem0 retry-failed requeues them)" if outbox["failed"] else ""
    out.fields(
        [
            ("file", outbox["path"]),
            ("pending", outbox["pending"]),
            ("failed", f"{outbox['failed']}{hint}"),
        ],
        indent=2,
    )
    for row in outbox["failed_writes"]:
        scope = row["user_id"] + (f"/{row['agent_id']}" if row["agent_id"] else "")
        out.line(
            f"    #{row['id']} {scope}  {short_date(row['queued_at'])}  "
            f"attempts {row['attempts']}  {row['error']}"
        )


def _print_tokens(out: Output, tokens: dict[str, Any] | None) -> None:
    """Model tokens spent on memory, per write and by kind (see ``TokenMeter``)."""
    if not tokens or not tokens["tokens_writes"]:
        out.line("Model tokens: none counted yet (counted from the first write)")
        return
    out.line(f"Model tokens since {short_date(tokens['since'])}")
    pairs = [
        (
            "per write",
            f"{tokens['tokens_in_per_write']:,.0f} in / {tokens['tokens_out_per_write']:,.0f} out"
            f"  ({tokens['tokens_writes']} writes)",
        )
    ]
    for kind, label in (("extraction", "extraction"), ("judge", "time judgement")):
        pairs.append(
            (
                label,
                f"{tokens[f'tokens_in_{kind}']:,} in / {tokens[f'tokens_out_{kind}']:,} out"
                f"  ({tokens[f'model_calls_{kind}']} calls)",
            )
        )
    if tokens["tokens_estimated_calls"]:
        pairs.append(
            ("estimated", f"{tokens['tokens_estimated_calls']} calls (the model reported no usage)")
        )
    out.fields(pairs, indent=2)


@click.command()
@store_command(reads=True)
def status(*, settings: Settings, out: Output) -> None:
    """Show the configuration in effect and whether the memory store is usable.

    Reports the backend and whether it is reachable, the folder lock's holder,
    vector sizes of store and embedder, telemetry, the model tokens memory
    spent per write, and the write outbox.
    Exits 3 when the backend is unreachable or locked, 2 when the embedder
    does not fit the store.
    """
    report = gather_status(settings)
    if out.as_json:
        out.json(report)
    else:
        _print_status(out, report)
    code = _exit_code(report)
    if code:
        raise click.exceptions.Exit(int(code))


def _index_line(backend: dict[str, Any]) -> str:
    """``exact search (no HNSW): 1200 points, 1200 indexed vectors, 1 segment``."""
    kinds = {
        "exact": "exact search (no HNSW; `agentscope-mem0 optimize` builds it)",
        "hnsw": "HNSW (points added since the last optimize are searched exactly)",
    }
    text = kinds.get(backend["index"], str(backend["index"]))
    if backend.get("segments") is not None:
        text += (
            f": {backend.get('points', 0)} points, {backend.get('indexed_vectors', 0)} "
            f"indexed vectors, {backend['segments']} segment(s)"
        )
    return text
