"""Keep mem0 quiet: its telemetry off, its notices about optional extras below WARNING.

Telemetry: mem0 2.2 reads ``MEM0_TELEMETRY`` once, when
``mem0.memory.telemetry`` is imported, and with telemetry on every
``AsyncMemory`` opens a second local Qdrant under ``$MEM0_DIR`` and phones
home. This module is imported before anything that imports mem0. When mem0
came first, its import already built the hosted client's PostHog client
(``client_telemetry``), which sends an ``$identify`` event on its own checks:
that client is dropped too. A user who set ``MEM0_TELEMETRY`` is left alone.

Its id file: mem0 2.2 writes ``$MEM0_DIR/config.json`` (``~/.mem0`` by
default) with an anonymous ``user_id`` when it is imported, an id that only
its telemetry reads. When telemetry is off and mem0 is not imported yet, this
module watches for mem0's first import (an import hook that finds nothing
itself) and then loads mem0's small ``mem0.memory.setup`` module first, with
the function that writes the file replaced by one that does nothing, so
mem0's import finds it loaded and writes no id (mem0 still creates the empty
folder). With telemetry on, or mem0 imported first, the file is mem0's
business and is left as it is.

Notices: mem0 2.2 logs at WARNING when spaCy (``mem0ai[nlp]``) or fastembed
is missing: "Failed to load spaCy lemma model ... pip install mem0ai[nlp]",
once per model and process, and "fastembed not installed - BM25 keyword
search disabled". Neither is something to fix here: this package lemmatises
and encodes keywords without them. A filter on those two mem0 loggers turns
these records (and only these) into DEBUG records, so they reach a handler
only when the user asked for mem0's logs at DEBUG, e.g.
``logging.getLogger("mem0").setLevel(logging.DEBUG)``.

All three are set up when this package is imported, and import nothing of mem0.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import logging
import os
import sys
from typing import Any

__all__ = [
    "ENV",
    "NOTICE_LOGGERS",
    "USER_CHOSE",
    "OptionalExtraNotices",
    "disable_telemetry_unless_chosen",
    "install",
    "set_demoted",
    "skip_mem0_id_file",
]

# -- telemetry ----------------------------------------------------------------------

ENV = "MEM0_TELEMETRY"

USER_CHOSE = ENV in os.environ
"""Whether the user set ``MEM0_TELEMETRY`` themselves; then we leave it alone."""


def disable_telemetry_unless_chosen() -> None:
    """Turn telemetry off, also in mem0 modules imported before this package."""
    if USER_CHOSE:
        return
    os.environ[ENV] = "False"
    for name in ("mem0.memory.telemetry", "mem0.memory.main", "mem0.client.main"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, ENV):
            setattr(module, ENV, False)
    module = sys.modules.get("mem0.memory.telemetry")
    for attribute in ("client_telemetry", "_oss_telemetry_instance"):
        client: Any = getattr(module, attribute, None)
        if getattr(client, "posthog", None) is not None:
            # Dropped, not closed: closing would flush whatever it queued over the network.
            client.posthog = None


# -- mem0's id file ---------------------------------------------------------------------


def _telemetry_on() -> bool:
    return os.environ.get(ENV, "True").lower() in ("true", "1", "yes")


def _no_id_file() -> None:
    """Stands in for mem0's ``setup_config``: telemetry is off, no id is needed."""


def _load_setup_without_id_file() -> None:
    """Load ``mem0.memory.setup`` with its id-file writer replaced by a no-op."""
    # PathFinder locates the package without importing it.
    package = importlib.machinery.PathFinder.find_spec("mem0")
    if package is None or not package.submodule_search_locations:
        return
    path = os.path.join(next(iter(package.submodule_search_locations)), "memory", "setup.py")
    spec = importlib.util.spec_from_file_location("mem0.memory.setup", path)
    if spec is None or spec.loader is None or not os.path.exists(path):
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # standard library imports only
    if not callable(getattr(module, "setup_config", None)):
        return  # another mem0 layout: leave it to mem0
    module.setup_config = _no_id_file  # type: ignore[attr-defined]
    sys.modules["mem0.memory.setup"] = module


class _BeforeMem0Import(importlib.abc.MetaPathFinder):
    """Runs once, when ``mem0`` is first imported, and finds nothing itself."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> None:
        if fullname == "mem0":
            sys.meta_path.remove(self)
            if not _telemetry_on() and "mem0.memory.setup" not in sys.modules:
                _load_setup_without_id_file()
        return None


def skip_mem0_id_file() -> None:
    """Keep mem0's coming import from writing its id file while telemetry is off."""
    if "mem0" in sys.modules or any(isinstance(f, _BeforeMem0Import) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _BeforeMem0Import())


# -- notices about optional extras ------------------------------------------------------

NOTICE_LOGGERS = ("mem0.utils.spacy_models", "mem0.vector_stores.qdrant")
"""The mem0 loggers that report missing optional extras."""

_NOTICES = (
    "failed to load spacy",
    "spacy is not installed",
    "fastembed not installed",
    "failed to load bm25 encoder",
)

_demoted = True


def set_demoted(demoted: bool) -> None:
    """Demote the notices (the default) or pass them on at their own level."""
    global _demoted
    _demoted = demoted


class OptionalExtraNotices(logging.Filter):
    """Turns mem0's missing-extra warnings into DEBUG records."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Demote a notice; drop it unless its logger is enabled for DEBUG."""
        if not _demoted or record.levelno < logging.WARNING:
            return True
        text = str(record.msg).lower()
        if not any(notice in text for notice in _NOTICES):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)


_FILTER = OptionalExtraNotices()


def install() -> None:
    """Put the filter on mem0's notice loggers (idempotent)."""
    for name in NOTICE_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


disable_telemetry_unless_chosen()
skip_mem0_id_file()
install()
