"""The four-session demo: what the user said shapes later sessions, and a newer
fact replaces an older one.

Session 1 states a chart preference and a home city, session 2 uses both;
session 3 says the user moved, and session 4 uses the new city, not the old:
the package's time judgement marked the old memory superseded (kept, hidden
from recall). The offline scripted model answers that judgement with the
shipped :class:`~agentscope_mem0.testing.RuleJudge`.

Run it with ``python demos/oss_demo.py`` or ``agentscope-mem0 demo``. The
memory side is always real: the offline embedder, the on-disk vector store,
the history database and mem0's extraction pipeline. The chat model is
DashScope when ``DASHSCOPE_API_KEY`` is set, an OpenAI-compatible endpoint
when ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` is set (Ollama, vLLM and
llama.cpp servers included: message contents go as plain strings, and with a
base URL mem0 extracts with the compact prompt unless ``MEM0_EXTRACTION=mem0``),
and otherwise a small offline scripted model.

The demo stores under a user of its own, ``demo-user`` (:data:`DEMO_USER`), in
the data folder it names first, replacing only that user's earlier memories
there (those of a previous demo run): the memories of the folder's real users
are never touched. ``agentscope-mem0 list --user demo-user`` shows what it
remembered.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from agentscope.agent import Agent
from agentscope.event import (
    ReplyStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultEndEvent,
    ToolResultTextDeltaEvent,
)
from agentscope.message import HintBlock, Msg, ToolCallBlock, ToolResultBlock, UserMsg
from agentscope.model import ChatModelBase
from agentscope.tool import Toolkit
from pydantic import SecretStr

from ._formatter import StringContentFormatter
from ._mem0.backend import Mem0Backend
from ._mem0.extraction import check_extraction
from ._memories.lifecycle import DUPLICATE_OF, SUPERSEDED_BY, VALID_UNTIL
from ._middleware import Mem0Middleware
from ._modes import Mode, check_mode
from ._recall.note import is_memory_note
from ._scope import Scope
from .testing import ScriptedChatModel

__all__ = [
    "DEMO_USER",
    "NEW_CITY",
    "OLD_CITY",
    "SESSIONS",
    "SESSION_1",
    "SESSION_2",
    "SESSION_3",
    "SESSION_4",
    "chat_model_from_env",
    "run_demo",
]

DEMO_USER = "demo-user"
"""The user the demo remembers for: its own, so that a run, which starts by
forgetting that user's memories, never touches anyone else's."""
OLD_CITY = "Hangzhou"
NEW_CITY = "Beijing"
SESSION_1 = f"Please make my charts dark mode with matplotlib by default. I live in {OLD_CITY}."
SESSION_2 = "Draw a bar chart of my monthly sales."
SESSION_3 = f"I moved to {NEW_CITY} last month."
SESSION_4 = "Plot this week's temperatures where I live."
SESSIONS = (SESSION_1, SESSION_2, SESSION_3, SESSION_4)
SYSTEM_PROMPT = (
    "You are a data assistant who writes short Python plotting code. "
    "Follow the user's known preferences without asking again."
)


def chat_model_from_env() -> tuple[ChatModelBase, str]:
    """The chat model the environment asks for, and a line describing it."""
    if os.environ.get("DASHSCOPE_API_KEY"):
        from agentscope.credential import DashScopeCredential
        from agentscope.model import DashScopeChatModel

        name = os.environ.get("DASHSCOPE_MODEL", "qwen-plus")
        key = SecretStr(os.environ["DASHSCOPE_API_KEY"])
        return DashScopeChatModel(DashScopeCredential(api_key=key), model=name, stream=False), (
            f"DashScope {name}"
        )
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        from agentscope.credential import OpenAICredential
        from agentscope.model import OpenAIChatModel

        name = os.environ.get("OPENAI_MODEL", "gpt-4o-mini")
        base_url = os.environ.get("OPENAI_BASE_URL")
        credential = OpenAICredential(
            api_key=SecretStr(os.environ.get("OPENAI_API_KEY") or "not-needed"), base_url=base_url
        )
        where = f" at {base_url}" if base_url else ""
        # Plain-string contents: llama.cpp-style servers refuse lists of parts.
        model = OpenAIChatModel(
            credential, model=name, stream=False, formatter=StringContentFormatter()
        )
        return model, f"OpenAI-compatible {name}{where}"
    return ScriptedChatModel(_offline_script), (
        "the built-in offline scripted model (set DASHSCOPE_API_KEY, OPENAI_API_KEY or "
        "OPENAI_BASE_URL for a real one); memory, embeddings and storage are real"
    )


def _tool_names(tools: Sequence[dict[str, Any]] | None) -> set[str]:
    names = set()
    for tool in tools or []:
        function = tool.get("function", tool)
        names.add(str(function.get("name")))
    return names


def _offline_script(messages: list[Msg], tools: list[dict[str, Any]] | None) -> Any:
    """Answers like a cooperative model would, from what is in its context."""
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")
    request = messages[last_user].get_text_content() or ""
    recent = messages[last_user + 1 :]
    evidence = []
    for msg in recent:
        for block in msg.content:
            if isinstance(block, HintBlock) and isinstance(block.hint, str):
                evidence.append(block.hint)
            elif isinstance(block, ToolResultBlock):
                evidence.append(str(block.output))
    used_tool = any(isinstance(b, ToolResultBlock) for m in recent for b in m.content)
    names = _tool_names(tools)
    if "dark mode" in request:
        if "add_memory" in names and not used_tool:
            facts = [
                "The user wants charts in dark mode with matplotlib by default.",
                "The user lives in Hangzhou.",
            ]
            payload = {"thinking": "Lasting preferences and location.", "content": facts}
            return [ToolCallBlock(id="add-1", name="add_memory", input=json.dumps(payload))]
        return "Noted: dark-mode matplotlib charts from now on, and you live in Hangzhou."
    if moved := re.search(r"\bmoved to ([A-Z]\w+)", request):
        if "add_memory" in names and not used_tool:
            fact = f"The user moved to {moved.group(1)} last month."
            payload = {"thinking": "The user's home changed.", "content": [fact]}
            return [ToolCallBlock(id="add-2", name="add_memory", input=json.dumps(payload))]
        return f"Noted: you live in {moved.group(1)} now; I will use it from now on."
    if "search_memory" in names and not used_tool:
        payload = {"keywords": ["chart style preferences", "where the user lives"]}
        return [ToolCallBlock(id="search-1", name="search_memory", input=json.dumps(payload))]
    known = "\n".join(evidence).lower()
    # Every city the context presents as where the user lives (a stale one too).
    cities = list(
        dict.fromkeys(re.findall(r"\b(?:lives in|moved to) ([A-Z]\w+)", "\n".join(evidence)))
    )
    style = 'plt.style.use("dark_background")\n' if "dark" in known else ""
    if "temperature" in request:
        if len(cities) != 1:
            named = " and ".join(cities) or "no city"
            return f"Your memories name {named}; which city do you live in now?"
        return (
            f"Here are this week's temperatures in {cities[0]}"
            f"{' in dark mode' if style else ''}:\n```python\nimport matplotlib.pyplot as plt\n"
            f"{style}days = ['Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat', 'Sun']\n"
            "temps = [3, 5, 4, 6, 2, 1, 4]\nplt.plot(days, temps, marker='o')\n"
            f'plt.title("This week\'s temperatures in {cities[0]}")\nplt.show()\n```'
        )
    city = f" ({cities[0]})" if len(cities) == 1 else ""
    if "matplotlib" not in known:
        # Nothing remembered: a generic answer with a library the user did not ask for.
        return (
            "Here is a bar chart of monthly sales:\n```python\nimport plotly.express as px\n"
            "px.bar(x=['Jan', 'Feb', 'Mar', 'Apr'], y=[120, 135, 150, 160]).show()\n```"
        )
    return (
        f"Here is your monthly sales bar chart with matplotlib{' in dark mode' if style else ''}:"
        "\n```python\nimport matplotlib.pyplot as plt\n"
        f"{style}months = ['Jan', 'Feb', 'Mar', 'Apr']\nsales = [120, 135, 150, 160]\n"
        f"plt.bar(months, sales)\nplt.title('Monthly sales{city}')\nplt.show()\n```"
    )


async def _memories(backend: Mem0Backend, user_id: str) -> dict[str, dict[str, Any]]:
    """Every memory of the user, superseded ones included: id -> mem0's entry."""
    found = await backend.get_all_raw(Scope(user_id), limit=1000)
    return {str(m["id"]): m for m in found if m.get("id")}


def _text(entry: dict[str, Any]) -> str:
    return str(entry.get("memory", ""))


def _superseded(memories: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The superseded memories: id -> the id of the newer memory."""
    found = {}
    for memory_id, entry in memories.items():
        newer = (entry.get("metadata") or {}).get(SUPERSEDED_BY)
        if isinstance(newer, str):
            found[memory_id] = newer
    return found


def _print_timeline(memories: dict[str, dict[str, Any]], seen: set[str], out: TextIO) -> None:
    """One line per memory the time judgement marked superseded since ``seen``."""
    for memory_id, newer in _superseded(memories).items():
        if memory_id in seen:
            continue
        seen.add(memory_id)
        since = str((memories[memory_id].get("metadata") or {}).get(VALID_UNTIL, "?"))[:10]
        replaced_by = _text(memories[newer]) if newer in memories else newer
        print(
            f'[mem0 timeline] "{_text(memories[memory_id])}" no longer true since {since}: '
            f'superseded by "{replaced_by}" (kept, left out of recall)',
            file=out,
            flush=True,
        )


async def _turn(
    agent: Agent, mw: Mem0Middleware, backend: Mem0Backend, user_id: str, text: str, out: TextIO
) -> str:
    """One reply, printing memory traffic as it happens."""
    before = await _memories(backend, user_id)
    known = set(before)
    superseded = set(_superseded(before))
    print(f"[user] {text}", file=out, flush=True)
    args: dict[str, str] = {}
    results: dict[str, str] = {}
    names: dict[str, str] = {}
    answer = ""
    async for event in agent.reply_stream(UserMsg("user", text), yield_final_msg=True):
        if isinstance(event, ReplyStartEvent):
            for note in (m for m in agent.state.context if is_memory_note(m)):
                hint = "".join(b.hint for b in note.content if isinstance(b, HintBlock))  # type: ignore[misc]
                body = "\n    ".join(hint.splitlines())
                print(f"[mem0 → context (static)]\n    {body}", file=out, flush=True)
        elif isinstance(event, ToolCallStartEvent):
            names[event.tool_call_id] = event.tool_call_name
        elif isinstance(event, ToolCallDeltaEvent):
            args[event.tool_call_id] = args.get(event.tool_call_id, "") + event.delta
        elif isinstance(event, ToolCallEndEvent):
            name = names.get(event.tool_call_id, "?")
            print(
                f"[tool call (agent)] {name}({args.get(event.tool_call_id, '')})",
                file=out,
                flush=True,
            )
        elif isinstance(event, ToolResultTextDeltaEvent):
            results[event.tool_call_id] = results.get(event.tool_call_id, "") + event.delta
        elif isinstance(event, ToolResultEndEvent):
            body = "\n    ".join(results.get(event.tool_call_id, "").splitlines())
            print(f"[tool result (agent)]\n    {body}", file=out, flush=True)
            if names.get(event.tool_call_id) == "add_memory":
                # add_memory stores before it answers; the automatic write of
                # this exchange is queued only after the reply.
                for memory_id, entry in (await _memories(backend, user_id)).items():
                    if memory_id not in known:
                        known.add(memory_id)
                        print(f"[agent → mem0 (add_memory)] {_text(entry)}", file=out, flush=True)
        elif isinstance(event, Msg) and event.role == "assistant":
            answer = event.get_text_content() or ""
    print(f"[assistant] {answer}", file=out, flush=True)
    await mw.flush()  # the writes are stored and judged against older memories
    after = await _memories(backend, user_id)
    for memory_id, entry in after.items():
        if memory_id not in known:
            print(f"[context → mem0 (static)] {_text(entry)}", file=out, flush=True)
    _print_timeline(after, superseded, out)
    return answer


async def _store_before_stopping(mw: Mem0Middleware) -> None:
    """After a Ctrl-C, store the writes under way, saying so; a second Ctrl-C
    (see ``agentscope-mem0 demo``) leaves them in the outbox instead."""
    pending = int(mw.stats().get("writes_pending", 0))
    if not pending:
        print("\ninterrupted; no write was waiting to be stored.", file=sys.stderr, flush=True)
        return
    writes = "1 write" if pending == 1 else f"{pending} writes"
    print(
        f"\ninterrupted; storing {writes} of this conversation first (mem0 extracts them "
        "with the chat model). Press Ctrl-C again to stop now: they stay in the outbox in "
        f"{mw.folder} and are stored the next time a memory opens that folder.",
        file=sys.stderr,
        flush=True,
    )
    stored = await mw.aclose()
    done = "stored" if stored else "not all stored: the rest stay in the outbox for the next start"
    print(f"{writes}: {done}.", file=sys.stderr, flush=True)


async def run_demo(
    mode: Mode = "both",
    *,
    folder: str | os.PathLike[str] | None = None,
    user_id: str = DEMO_USER,
    chat_model: ChatModelBase | None = None,
    out: TextIO = sys.stdout,
) -> tuple[str, ...]:
    """Run the four sessions and return their answers.

    Args:
        mode: The middleware mode to show (the middleware's default, ``both``).
        folder: The data folder (default: ``$AGENTSCOPE_MEM0_DIR`` or
            ``~/.agentscope-mem0``, the folder the CLI reads).
        user_id: Whose memories (the demo's own user by default); the demo
            replaces them.
        chat_model: Overrides the model chosen from the environment.
        out: Where the transcript goes.
    """
    check_mode(mode)
    if chat_model is None:
        chat_model, described = chat_model_from_env()
    else:
        described = type(chat_model).__name__
    print(f"chat model: {described}", file=out)
    # Local servers (a base URL) rarely have room for mem0's 8k-token extraction prompt.
    extraction = check_extraction(
        os.environ.get("MEM0_EXTRACTION")
        or ("compact" if os.environ.get("OPENAI_BASE_URL") else "mem0")
    )
    mw = Mem0Middleware.local(
        user_id=user_id,
        chat_model=chat_model,
        mode=mode,
        folder=folder,
        parameters=Mem0Middleware.Parameters(extraction=extraction),
    )
    own = " (the demo's own user: no other user's memories are touched)" * (user_id == DEMO_USER)
    print(
        f"mode: {mode}\n"
        f"memories of user {user_id!r}{own} are stored in {mw.folder}, replacing that "
        "user's earlier ones there (--folder or $AGENTSCOPE_MEM0_DIR picks another folder)",
        file=out,
    )
    backend = Mem0Backend(mw.client)
    async with mw:
        try:
            await backend.delete_all(Scope(user_id))  # start from a clean store
            answers = []
            for session, text in enumerate(SESSIONS, 1):
                print(f"\n=== session {session}: a new agent with an empty context ===", file=out)
                agent = Agent(
                    name="assistant",
                    system_prompt=SYSTEM_PROMPT,
                    model=chat_model,
                    middlewares=[mw],
                    toolkit=Toolkit(tools=await mw.list_tools()),
                )
                answers.append(await _turn(agent, mw, backend, user_id, text, out))
            memories = await _memories(backend, user_id)
        except asyncio.CancelledError:  # Ctrl-C: asyncio cancels the demo's task
            await _store_before_stopping(mw)
            raise
    used = "dark" in answers[1].lower() and "matplotlib" in answers[1].lower()
    verdict = "used" if used else "did NOT use"
    print(f"\nsession 2 {verdict} dark mode and matplotlib without being told.", file=out)
    current = NEW_CITY in answers[3] and OLD_CITY not in answers[3]
    verdict = "used" if current else "did NOT use"
    print(f"session 4 {verdict} {NEW_CITY}, not {OLD_CITY}, as where the user lives now.", file=out)
    old = [i for i, entry in memories.items() if OLD_CITY in _text(entry)]
    kept = [i for i in old if i in _superseded(memories)]
    repeats = [i for i in old if (memories[i].get("metadata") or {}).get(DUPLICATE_OF) in kept]
    print(
        f"{len(kept)} of {len(old)} memories saying {OLD_CITY} are marked superseded and "
        f"{len(repeats)} merged into them as repeats (kept in the store, left out of recall).",
        file=out,
    )
    folder_option = "" if folder is None else f" --folder {mw.folder}"
    print(
        f"see what was remembered: agentscope-mem0 list --user {user_id}{folder_option}"
        " (--all shows the superseded ones too)",
        file=out,
    )
    if kept:
        print(f"see the timeline: agentscope-mem0 history {kept[0]}{folder_option}", file=out)
    return tuple(answers)
