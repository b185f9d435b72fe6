"""Keep mem0's notices about optional extras out of users' logs.

mem0 2.2 logs at WARNING when spaCy (``mem0ai[nlp]``) or fastembed is
missing: "Failed to load spaCy lemma model ... pip install mem0ai[nlp]", once
per model and process, and "fastembed not installed - BM25 keyword search
disabled". Neither is something to fix here: this package lemmatises and
encodes keywords without them. A filter on those two mem0 loggers turns these
records (and only these) into DEBUG records, so they reach a handler only when
the user asked for mem0's logs at DEBUG, e.g.
``logging.getLogger("mem0").setLevel(logging.DEBUG)``.

Installing the filter imports nothing; it runs when this package is imported.
"""

from __future__ import annotations

import logging

__all__ = ["NOTICE_LOGGERS", "OptionalExtraNotices", "install", "set_demoted"]

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


install()
