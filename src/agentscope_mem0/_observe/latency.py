"""The latest durations of a kind of call, for percentiles in ``stats()``."""

from __future__ import annotations

import math
import threading
from collections import deque

__all__ = ["LatencyRecorder"]


class LatencyRecorder:
    """The latest ``window`` durations, for percentiles.

    Args:
        window: How many of the most recent durations to keep.
    """

    def __init__(self, window: int = 1000) -> None:
        if window < 1:
            raise ValueError(f"window must be positive, got {window!r}")
        self._samples: deque[float] = deque(maxlen=window)
        self._lock = threading.Lock()
        self.count = 0
        """Durations recorded since construction (not only those kept)."""

    def record(self, seconds: float) -> None:
        """Add one duration, in seconds."""
        with self._lock:
            self._samples.append(float(seconds))
            self.count += 1

    def percentile(self, q: float) -> float | None:
        """The ``q``-th percentile (0–100) of the kept durations, nearest-rank.

        Returns:
            Seconds, or ``None`` before anything was recorded.
        """
        if not 0 <= q <= 100:
            raise ValueError(f"q must be within 0..100, got {q!r}")
        with self._lock:
            ordered = sorted(self._samples)
        if not ordered:
            return None
        rank = max(1, math.ceil(q / 100 * len(ordered)))
        return ordered[rank - 1]

    def summary(self, prefix: str) -> dict[str, float | int | None]:
        """``{prefix}_p50``, ``{prefix}_p95`` (seconds) and ``{prefix}_count``."""
        return {
            f"{prefix}_p50": self.percentile(50),
            f"{prefix}_p95": self.percentile(95),
            f"{prefix}_count": self.count,
        }
