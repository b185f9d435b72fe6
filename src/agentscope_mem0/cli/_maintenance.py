"""``migrate`` and ``optimize``: maintenance of the embedded store (Qdrant Edge).

Both need the data folder to themselves: stop the app using it first (another
process holding it gets exit code 3). ``migrate`` moves a release-0.1 folder
onto Qdrant Edge, which also happens by itself on the first open.
``optimize`` builds the HNSW index, which the engine does holding Python's
GIL for the whole run, so the package never does it on its own in a serving
process.
"""

from __future__ import annotations

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
@store_command()
def migrate(*, settings: Settings, out: Output) -> None:
    """Move a release-0.1 data folder (qdrant/) onto Qdrant Edge (edge/).

    Every memory keeps its id, payload and vector; the old qdrant/ folder is
    left in place (delete it when satisfied). The same happens by itself the
    first time the folder is opened. A folder with nothing to move is
    reported as such (exit 0).
    """
    from ..local._folder import FolderLayout
    from ..local._migrate import migrate_folder

    _embedded_only(settings, "migrate")
    layout = FolderLayout(settings.folder)
    old = layout.qdrant
    nothing = None
    if not (old / "collection").is_dir():
        nothing = f"{settings.folder} holds no release-0.1 store (no qdrant/ folder)"
    elif layout.edge.exists():
        nothing = f"{settings.folder} was migrated before ({layout.edge} exists)"
    if nothing is not None:
        if out.as_json:
            out.json({"migrated": {}, "folder": str(settings.folder), "nothing_to_do": nothing})
        else:
            out.note(f"nothing to migrate: {nothing}")
        return
    counts = migrate_folder(settings.folder)
    if out.as_json:
        out.json({"migrated": counts, "folder": str(settings.folder)})
    else:
        for name, count in counts.items():
            out.line(f"{name}: {count} points moved to Qdrant Edge")
        out.note(f"the old store in {old} is left in place")


@click.command()
@store_command()
def optimize(*, settings: Settings, out: Output) -> None:
    """Build the HNSW index of the embedded store (and drop deleted points).

    Takes minutes at 100k memories; run it while no app uses the folder.
    Searches are exact (and fast enough to 100k) without it.
    """
    from ..local import close_shared_clients
    from ..local._edge_index import optimize_store
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
