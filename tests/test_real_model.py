"""Memory with a real model: an OpenAI-compatible server (by default the local
Qwen2.5-Coder-1.5B of ``local-llm``, at ``AGENTSCOPE_MEM0_REAL_MODEL_URL``).

Marked ``real_model``: the suite leaves them out (pyproject's ``-m``); run them
with ``python -m pytest -m real_model``. Each skips, saying why, when the
server does not answer. They are slow on two CPU cores (minutes).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import UserMsg

from agentscope_mem0 import Mem0Middleware, StringContentFormatter
from agentscope_mem0.testing import ScriptedChatModel
from fakes import note_text

URL = os.environ.get("AGENTSCOPE_MEM0_REAL_MODEL_URL", "http://127.0.0.1:8765/v1")
MODEL = os.environ.get("AGENTSCOPE_MEM0_REAL_MODEL", "qwen")
DEMOS = Path(__file__).resolve().parents[1] / "demos"


@functools.cache
def _unavailable() -> str | None:
    try:
        # A llama.cpp server answers nothing while it generates: a busy one
        # takes a while, one that is not running refuses at once.
        with urllib.request.urlopen(f"{URL}/models", timeout=300) as answer:
            names = [m.get("id") for m in json.loads(answer.read()).get("data", [])]
    except (OSError, ValueError) as exc:
        return f"no OpenAI-compatible server at {URL} ({exc}); start one (local-llm start)"
    if MODEL not in names:
        return f"{URL} serves {names}, not {MODEL!r} (AGENTSCOPE_MEM0_REAL_MODEL)"
    return None


pytestmark = pytest.mark.real_model


@pytest.fixture(autouse=True)
def _needs_the_server() -> None:
    """Asked only when a test here runs (not when the suite deselects them)."""
    why_not = _unavailable()
    if why_not is not None:
        pytest.skip(why_not)


def real_chat_model() -> Any:
    """The real model as AgentScope users would build it for llama.cpp."""
    from agentscope.credential import OpenAICredential
    from agentscope.model import OpenAIChatModel
    from pydantic import SecretStr

    return OpenAIChatModel(
        OpenAICredential(api_key=SecretStr("not-needed"), base_url=URL),
        model=MODEL,
        stream=False,
        parameters=OpenAIChatModel.Parameters(temperature=0.0, max_tokens=700),
        formatter=StringContentFormatter(),
    )


def test_the_openai_compatible_example_runs_against_the_server(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "OPENAI_BASE_URL": URL,
        "OPENAI_MODEL": MODEL,
        "OPENAI_EMBEDDING_MODEL": "local",
    }
    env.pop("OPENAI_API_KEY", None)
    done = subprocess.run(
        [sys.executable, str(DEMOS / "openai_compatible_example.py"), "--folder", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=1800,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[session 2] assistant:" in done.stdout
    listed = subprocess.run(
        [sys.executable, "-m", "agentscope_mem0.cli", "list", "--user", "alice", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "AGENTSCOPE_MEM0_DIR": str(tmp_path)},
    )
    assert "Hangzhou" in listed.stdout, (done.stdout, listed.stdout, listed.stderr)


async def _ask(mw: Mem0Middleware, text: str) -> str:
    """One turn whose agent is scripted: what the memory note put before it."""
    agent_model = ScriptedChatModel("Noted.")
    bot = Agent(name="helper", system_prompt="You help.", model=agent_model, middlewares=[mw])
    await bot.reply(UserMsg(name="user", content=text))
    return note_text(agent_model.calls[0])


async def test_one_exchange_extracted_and_recalled_and_one_change_judged(tmp_path: Path) -> None:
    """The smoke a CI run could afford: compact extraction, recall, one judged change."""
    mw = Mem0Middleware.local(
        user_id="alice",
        chat_model=real_chat_model(),
        folder=tmp_path,
        mode="static_control",
        parameters=Mem0Middleware.Parameters(extraction="compact"),
    )
    async with mw:
        await _ask(mw, "I live in Hangzhou, in a flat near the West Lake.")
        assert await mw.flush(timeout=900)
        assert "Hangzhou" in await _ask(mw, "Which city do I live in?")
        await _ask(mw, "I moved to Beijing last month for a new job.")
        assert await mw.flush(timeout=900)
        raw = await mw.client.get_all(filters={"user_id": "alice"})
        stored = {m["memory"]: m.get("metadata") or {} for m in raw["results"]}
        old = [m for m in stored if "Hangzhou" in m and "Beijing" not in m]
        assert old and all(stored[m].get("superseded_by") for m in old), stored
        stats = mw.stats()
        assert stats["writes_failed"] == 0 and stats["tokens_estimated_calls"] == 0
        assert stats["tokens_in_per_write"] < 4096


async def test_an_exchange_that_tells_nothing_stores_nothing(tmp_path: Path) -> None:
    """With the real model, the assistant's answer to a question is not the user's fact,
    and a fact told in Chinese is kept in Chinese."""
    mw = Mem0Middleware.local(
        user_id="alice",
        chat_model=real_chat_model(),
        folder=tmp_path,
        mode="static_control",
        parameters=Mem0Middleware.Parameters(extraction="compact", judge=False),
    )
    async with mw:
        bot = Agent(
            name="helper",
            system_prompt="You help.",
            model=ScriptedChatModel("Mount Kilimanjaro is 5,895 metres high, in Tanzania."),
            middlewares=[mw],
        )
        await bot.reply(UserMsg(name="user", content="How high is Mount Kilimanjaro?"))
        assert await mw.flush(timeout=900)
        assert (await mw.client.get_all(filters={"user_id": "alice"}))["results"] == []
        await _ask(mw, "我在杭州的一家医院当护士。")
        assert await mw.flush(timeout=900)
        raw = await mw.client.get_all(filters={"user_id": "alice"})
        memories = [m["memory"] for m in raw["results"]]
        assert any("护士" in m for m in memories), memories
        assert mw.stats()["writes_failed"] == 0
