"""Four sessions, one memory: what the user says shapes later sessions, and a
newer fact ("I moved to Beijing") supersedes an older one ("I live in Hangzhou").

    python demos/oss_demo.py [--mode static_control|agent_control|both] [--folder DIR] [--user ID]

The same command as ``agentscope-mem0 demo``, with the same options. The
default mode is ``both``, the middleware's default (``MODE`` in the
environment works too). Memories are stored for the demo's own user,
``demo-user``, in the data folder (``$AGENTSCOPE_MEM0_DIR`` or
``~/.agentscope-mem0`` unless ``--folder`` names another), replacing only that
user's memories of an earlier run (no other user's are touched); afterwards
``agentscope-mem0 list --user demo-user`` shows the current ones (``--all`` the
superseded ones too). See ``agentscope_mem0.demo`` for the choice of chat
model (DashScope, an OpenAI-compatible endpoint, or the offline scripted one).
"""

from __future__ import annotations

import logging

from agentscope_mem0.cli._demo_command import demo

if __name__ == "__main__":
    logging.basicConfig(level=logging.ERROR)
    demo(prog_name="oss_demo.py")
