"""Running the ``agentscope-mem0`` command in-process, for the CLI tests."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from agentscope_mem0 import build_local_memory
from agentscope_mem0.cli import cli
from agentscope_mem0.local import close_shared_clients
from agentscope_mem0.testing import HashEmbedding, ScriptedChatModel

CLI_ENV = {
    "AGENTSCOPE_MEM0_EMBEDDER": "hash",
    "DASHSCOPE_API_KEY": "",
    "OPENAI_API_KEY": "",
    "OPENAI_BASE_URL": "",
}


def run(*args: str, input: str | None = None) -> Result:
    """Run the command in-process, stdout and stderr kept apart."""
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False)


def run_json(*args: str, input: str | None = None) -> Any:
    result = run(*args, "--json", input=input)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def add_raw(user: str, text: str, *extra: str) -> str:
    """Store ``text`` verbatim; returns the new memory's id."""
    stored = run_json("add", "--user", user, "--raw", text, *extra)["stored"]
    assert len(stored) == 1
    return str(stored[0]["id"])


def make_embedder() -> Any:
    """An embedder named by ``module:attr`` in a config file."""
    from agentscope_mem0.testing import HashEmbedding

    return HashEmbedding(96)


def seed(folder: Path, count: int = 1000) -> Path:
    """Fill ``folder``'s embedded store with ``count`` memories through mem0."""
    asyncio.run(_fill(folder, count))
    return folder


PER_CALL = 50


async def _fill(folder: Path, count: int) -> None:
    memory = build_local_memory(
        ScriptedChatModel("OK."), embedding_model=HashEmbedding(), folder=folder
    )
    try:
        for call in range(count // PER_CALL):
            kwargs: dict[str, Any] = {
                "user_id": f"user{call % 5}",
                "infer": False,
                "metadata": {"batch": call, "tags": ["a", "ü"], "nested": {"z": 1, "a": None}},
            }
            if call % 2 == 0:
                kwargs["agent_id"] = f"agent{call % 3}"
            if call == 3:
                kwargs["run_id"] = "run-7"
            if call == 4:
                kwargs["expiration_date"] = "2999-12-31"
            messages = []
            for j in range(PER_CALL):
                message = {
                    "role": "assistant" if j % 4 == 0 else "user",
                    "content": f"fact {call}-{j}: user{call % 5} likes item {j} — 杭州 ✓",
                }
                if j % 7 == 0:
                    message["name"] = "narrator"
                messages.append(message)
            await memory.add(messages, **kwargs)
        listed = await memory.get_all(filters={"user_id": "user1"}, top_k=5)
        for item in listed["results"]:
            await memory.update(item["id"], text=item["memory"] + " (corrected)")
    finally:
        memory.close()
        close_shared_clients(folder)
