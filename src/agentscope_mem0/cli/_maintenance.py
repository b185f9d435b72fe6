"""``migrate`` and ``optimize``: maintenance of the embedded store (Qdrant Edge).

Both need the data folder to themselves: stop the app using it first (another
process holding it gets exit code 3). ``migrate`` moves a release-0.1 folder
onto Qdrant Edge, which also happens by itself on the first open;
``migrate --to URL`` copies the folder's store into a Qdrant server.
``optimize`` builds the HNSW index, which the engine does holding Python's
GIL for the whole run, so the package never does it on its own in a serving
process.
"""

from __future__ import annotations

from typing import Any

import click

from .._exceptions import ConfigurationError
from ._common import store_command
from ._config import Settings
from ._output import Output

__all__ = ["migrate", "optimize"]


def _embedded_only(settings: Settings, command: str) -> None:
    if settings.backend != "embedded":
        raise ConfigurationError(
            f"`{command}` works on the embedded store; the configured backend is "
            f"{settings.backend!r}"
        )


@click.command()
@click.option(
    "--to",
    "to_url",
    default=None,
    metavar="URL",
    help="Copy the folder's store into this Qdrant server (http(s)://host:6333) instead.",
)
@click.option(
    "--collection",
    default=None,
    help="With --to: the server collection (default: agentscope_mem0).",
)
@click.option(
    "--api-key-env",
    default="QDRANT_API_KEY",
    show_default=True,
    help="With --to: the environment variable holding the server's API key, if it needs one.",
)
@store_command()
def migrate(
    *,
    settings: Settings,
    out: Output,
    to_url: str | None,
    collection: str | None,
    api_key_env: str,
) -> None:
    """Move a release-0.1 data folder (qdrant/) onto Qdrant Edge (edge/),
    or with --to URL copy the folder's store into a Qdrant server.

    Every memory keeps its id, payload and vector; the old qdrant/ folder is
    left in place (delete it when satisfied). The same happens by itself the
    first time the folder is opened. A folder with nothing to move is
    reported as such (exit 0).

    With --to, every memory (and mem0's entity links) goes to the server with
    its id, payload, dense and keyword vectors, and is checked there point by
    point. Interrupted, run it again: it carries on where it stopped. Then
    point the app at the server (backends.qdrant_server_config).
    """
    from ..local._folder import FolderLayout
    from ..local._migrate import migrate_if_needed

    _embedded_only(settings, "migrate")
    if to_url is not None:
        _copy_to_server(settings, out, to_url, collection, api_key_env)
        return
    if collection is not None:
        raise ConfigurationError("--collection goes with --to URL")
    layout = FolderLayout(settings.folder)
    counts = migrate_if_needed(settings.folder)
    if counts is None:
        nothing = (
            f"{settings.folder} was migrated before ({layout.edge} exists)"
            if (layout.qdrant / "collection").is_dir()
            else f"{settings.folder} holds no release-0.1 store (no qdrant/ folder)"
        )
        if out.as_json:
            out.json({"migrated": {}, "folder": str(settings.folder), "nothing_to_do": nothing})
        else:
            out.note(f"nothing to migrate: {nothing}")
        return
    if out.as_json:
        out.json({"migrated": counts, "folder": str(settings.folder)})
    else:
        for name, count in counts.items():
            out.line(f"{name}: {count} points moved to Qdrant Edge")
        out.note(f"the old store in {layout.qdrant} is left in place")


def _copy_to_server(
    settings: Settings, out: Output, url: str, collection: str | None, api_key_env: str
) -> None:
    import os

    from .._server.copy import copy_folder
    from ..backends import DEFAULT_COLLECTION, qdrant_server_config
    from ..local import close_shared_clients
    from ..local._migrate import migrate_if_needed
    from ._config import mask_url

    name = collection or DEFAULT_COLLECTION
    api_key = os.environ.get(api_key_env) or None
    qdrant_server_config(url, dims=1, api_key=api_key, collection=name)  # checks url and name
    migrate_if_needed(settings.folder)
    client = server_client(url, api_key)
    try:
        reports = copy_folder(settings.folder, client, target=url, collection=name)
    finally:
        client.close()
        close_shared_clients(settings.folder)
    if out.as_json:
        out.json(
            {"to": mask_url(url), "collection": name, **{k: vars(v) for k, v in reports.items()}}
        )
        return
    for source, report in reports.items():
        out.line(
            f"{source}: {report.points} points, {report.copied} sent this run, "
            f"{report.recopied} sent again, {report.verified} checked on the server "
            f"in {report.seconds} s"
            + (
                f"; the server holds {report.extra_on_server} more"
                if report.extra_on_server
                else ""
            )
        )
    out.note(
        f"point the app at the server: qdrant_server_config({mask_url(url)!r}, "
        f"collection={name!r}, ...); the folder is left as it was"
    )


def server_client(url: str, api_key: str | None) -> Any:
    """The ``QdrantClient`` for ``migrate --to`` (a seam the tests replace)."""
    from qdrant_client import QdrantClient

    return QdrantClient(url=url, api_key=api_key, check_compatibility=False)


@click.command()
@store_command()
def optimize(*, settings: Settings, out: Output) -> None:
    """Build the HNSW index of the embedded store (and drop deleted points).

    Takes minutes at 100k memories; run it while no app uses the folder.
    Searches are exact (and fast enough to 100k) without it.
    """
    from ..local import close_shared_clients
    from ..local._embedded import optimize_store
    from ..local._folder import FolderLayout
    from ..local._migrate import migrate_if_needed

    _embedded_only(settings, "optimize")
    edge = FolderLayout(settings.folder).edge
    migrate_if_needed(settings.folder)
    if not edge.is_dir():
        out.note("nothing stored yet")
        return
    try:
        report = optimize_store(edge)
    finally:
        close_shared_clients(settings.folder)
    if out.as_json:
        out.json(report)
        return
    for name, row in report.items():
        out.line(
            f"{name}: {row['points']} points, index {row['index']} "
            f"({row['hnsw_segments']} HNSW / {row['plain_segments']} plain segments) "
            f"in {row['seconds']} s"
        )
