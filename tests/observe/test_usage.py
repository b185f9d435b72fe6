"""The token meter's file: totals always counted in memory, a failing file said once."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from agentscope_mem0._observe.usage import CallTokens, TokenMeter, _SqliteTotals, read_usage


def test_a_failing_file_is_said_once_and_its_recovery_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    meter = TokenMeter(tmp_path / "usage.sqlite3")
    store = meter._store
    assert isinstance(store, _SqliteTotals)
    working = store._db
    broken = sqlite3.connect(":memory:")
    broken.close()  # every statement on it raises sqlite3.ProgrammingError
    store._db = broken
    tokens = CallTokens(input_tokens=10, output_tokens=2, estimated=False)
    with caplog.at_level(logging.INFO, logger="agentscope_mem0._observe.usage"):
        for _ in range(5):
            meter.add("extraction", tokens, writes=1)
        store._db = working
        meter.add("extraction", tokens, writes=1)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "counted in memory" in warnings[0].getMessage()
    assert any("again" in r.getMessage() for r in caplog.records if r.levelno == logging.INFO)
    assert meter.stats()["tokens_in_extraction"] == 60  # memory missed nothing
    kept = read_usage(tmp_path)
    assert kept is not None and kept["tokens_in_extraction"] == 10  # the file only the last
