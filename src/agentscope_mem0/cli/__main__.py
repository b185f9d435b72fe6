"""``python -m agentscope_mem0.cli``: the ``agentscope-mem0`` command."""

from __future__ import annotations

from ._app import main

if __name__ == "__main__":
    main()
