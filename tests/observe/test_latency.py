"""The latency recorder's percentiles and window."""

from __future__ import annotations

import pytest

from agentscope_mem0._observe.latency import LatencyRecorder


def test_percentiles_nearest_rank() -> None:
    rec = LatencyRecorder()
    assert rec.percentile(50) is None
    for ms in range(1, 101):
        rec.record(ms / 1000)
    assert rec.percentile(50) == pytest.approx(0.050)
    assert rec.percentile(95) == pytest.approx(0.095)
    assert rec.percentile(100) == pytest.approx(0.100)
    assert rec.summary("x") == {
        "x_p50": pytest.approx(0.050),
        "x_p95": pytest.approx(0.095),
        "x_count": 100,
    }


def test_recorder_keeps_a_window_but_counts_everything() -> None:
    rec = LatencyRecorder(window=10)
    for i in range(100):
        rec.record(float(i))
    assert rec.count == 100
    assert rec.percentile(0) == 90.0  # only the last ten are kept
