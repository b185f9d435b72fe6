"""Keep mem0's telemetry off unless the user asked for it.

mem0 2.2 reads ``MEM0_TELEMETRY`` once, when ``mem0.memory.telemetry`` is
imported, and with telemetry on every ``AsyncMemory`` opens a second local
Qdrant under ``$MEM0_DIR`` and phones home. This module is imported before
anything that imports mem0. When mem0 came first, its import already built
the hosted client's PostHog client (``client_telemetry``), which sends an
``$identify`` event on its own checks: that client is dropped too.
"""

from __future__ import annotations

import os
import sys
from typing import Any

ENV = "MEM0_TELEMETRY"

USER_CHOSE = ENV in os.environ
"""Whether the user set ``MEM0_TELEMETRY`` themselves; then we leave it alone."""


def disable_unless_chosen() -> None:
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


disable_unless_chosen()
