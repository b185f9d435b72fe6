"""mem0's notices about its optional extras (spaCy, fastembed) stay below WARNING
unless the user asked for mem0's logs."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

import agentscope_mem0  # noqa: F401  (installs the filter)
from agentscope_mem0._mem0 import quiet as _quiet


@pytest.fixture
def spacy_unloaded(monkeypatch: pytest.MonkeyPatch) -> None:
    from mem0.utils import spacy_models

    # mem0 warns once per process; let it try again.
    monkeypatch.setattr(spacy_models, "_load_failed_lemma", False)
    monkeypatch.setattr(spacy_models, "_nlp_lemma", None)
    monkeypatch.setitem(sys.modules, "spacy", None)  # missing, as without mem0ai[nlp]


def _lemma() -> None:
    from mem0.utils.spacy_models import get_nlp_lemma

    assert get_nlp_lemma() is None


def _fastembed(monkeypatch: pytest.MonkeyPatch) -> None:
    from mem0.vector_stores.qdrant import Qdrant

    monkeypatch.setitem(sys.modules, "fastembed", None)
    store = Qdrant.__new__(Qdrant)
    store._bm25_encoder = None
    assert store._get_bm25_encoder() is None


def test_spacy_and_fastembed_notices_are_not_warnings(
    spacy_unloaded: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    _lemma()
    _fastembed(monkeypatch)
    assert [r for r in caplog.records if r.name.startswith("mem0")] == []


def test_they_show_at_debug_when_mem0_logs_are_asked_for(
    spacy_unloaded: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="mem0")
    _lemma()
    _fastembed(monkeypatch)
    notices = [r for r in caplog.records if r.name.startswith("mem0")]
    assert {r.levelno for r in notices} == {logging.DEBUG}
    text = " ".join(r.getMessage() for r in notices)
    assert "spaCy lemma model" in text and "fastembed not installed" in text


def test_other_mem0_warnings_pass_unchanged(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    logging.getLogger("mem0.vector_stores.qdrant").warning("Collection is broken")
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


def test_the_cli_verbose_flag_lets_them_through(
    spacy_unloaded: None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    _quiet.set_demoted(False)
    try:
        _lemma()
    finally:
        _quiet.set_demoted(True)
    assert [r.levelno for r in caplog.records if r.name.startswith("mem0")] == [logging.WARNING]


def test_a_script_on_the_models_path_prints_no_notice() -> None:
    code = (
        "import logging, sys\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "sys.modules['spacy'] = None\n"
        "import agentscope_mem0\n"
        "from mem0.utils.spacy_models import get_nlp_lemma\n"
        "from mem0.utils.lemmatization import lemmatize_for_bm25\n"
        "get_nlp_lemma(); lemmatize_for_bm25('I live in Hangzhou')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=os.environ
    )
    assert done.returncode == 0, done.stderr
    assert "spaCy" not in done.stderr and "mem0ai[nlp]" not in done.stderr
