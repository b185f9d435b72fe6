"""Test helpers that wrap real components; only models and hosted services are faked.

* real mem0 on the offline fakes: :func:`real_memory`, :class:`RecordingClient`,
  :class:`UniqueFacts`, :func:`one_session`, :func:`note_text`;
* the hosted platform: :class:`FakePlatform` behind ``httpx.MockTransport``
  (:func:`hosted_client`), following the platform's documentation;
* ``agentscope.app``: the scripted model as a credential (:class:`ScriptedCredential`)
  and a user of the app over HTTP (:class:`AppUser`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx
from agentscope.credential import CredentialBase
from agentscope.message import HintBlock, Msg, UserMsg
from agentscope.model import ChatModelBase
from mem0 import AsyncMemory

from agentscope_mem0 import (
    DEFAULT_MEMORY_SECTION_HEADER,
    EmbedderBusyError,
    Outbox,
    SqliteWorkingStore,
    WorkingRecord,
    build_memory,
)
from agentscope_mem0.testing import HashEmbedding, RuleExtractor, ScriptedChatModel


def real_memory(
    store_config: dict[str, Any],
    chat_model: ScriptedChatModel | None = None,
    embedding: HashEmbedding | None = None,
) -> AsyncMemory:
    """A real mem0 AsyncMemory on local Qdrant, driven by the offline fakes, built
    as ``Mem0Middleware`` builds it (the on-disk Qdrant shared in the process)."""
    return build_memory(
        chat_model=chat_model or ScriptedChatModel(),
        embedding_model=embedding or HashEmbedding(),
        mem0_config=store_config,
    )


def close_memory(memory: AsyncMemory) -> None:
    """Release the on-disk Qdrant folder lock, for the next client on that folder."""
    memory.vector_store.client.close()


class RecordingClient:
    """Forwards to a real async mem0 client and records every call."""

    def __init__(self, inner: Any, *, search_delay: float = 0.0) -> None:
        self.inner = inner
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.search_delay = search_delay

    def named(self, name: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
        return [(a, k) for n, a, k in self.calls if n == name]

    async def search(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("search", args, kwargs))
        if self.search_delay:
            await asyncio.sleep(self.search_delay)
        return await self.inner.search(*args, **kwargs)

    async def add(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("add", args, kwargs))
        return await self.inner.add(*args, **kwargs)

    async def get_all(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("get_all", args, kwargs))
        return await self.inner.get_all(*args, **kwargs)

    async def delete_all(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(("delete_all", args, kwargs))
        return await self.inner.delete_all(*args, **kwargs)


class AddRecorder:
    """Forwards to mem0; records the user's texts of each add, in order, and whether
    two adds overlapped; ``delay`` holds each add, ``down`` fails it."""

    def __init__(self, inner: AsyncMemory, *, delay: float = 0.0) -> None:
        self.inner = inner
        self.delay = delay
        self.texts: list[str] = []
        self.running = 0
        self.overlaps = 0
        self.down = False

    async def add(self, messages: list[dict[str, str]], **kwargs: Any) -> Any:
        self.running += 1
        self.overlaps += self.running > 1
        try:
            await asyncio.sleep(self.delay)
            if self.down:
                raise ConnectionError("the store is down")
            result = await self.inner.add(messages, **kwargs)
            self.texts += [m["content"] for m in messages if m["role"] == "user"]
            return result
        finally:
            self.running -= 1

    async def get_all(self, *args: Any, **kwargs: Any) -> Any:
        return await self.inner.get_all(*args, **kwargs)

    async def delete(self, *args: Any, **kwargs: Any) -> Any:
        return await self.inner.delete(*args, **kwargs)


def said(text: str) -> list[dict[str, str]]:
    """An exchange in which the user says ``text``."""
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]


async def one_session(mw: Any, text: str, *, agent: str = "helper") -> ScriptedChatModel:
    """One reply of a fresh agent (empty context) with ``mw``; returns its model."""
    from agentscope.agent import Agent
    from agentscope.message import UserMsg

    model = ScriptedChatModel("Noted.")
    bot = Agent(name=agent, system_prompt="You help.", model=model, middlewares=[mw])
    await bot.reply(UserMsg(name="user", content=text))
    return model


def note_text(messages: Sequence[Any]) -> str:
    """The text of the memory note among the messages a model was given."""
    from agentscope.message import HintBlock

    from agentscope_mem0._recall.note import is_memory_note

    return "\n".join(
        str(block.hint)
        for msg in messages
        if is_memory_note(msg)
        for block in msg.content
        if isinstance(block, HintBlock)
    )


class UniqueFacts(RuleExtractor):
    """Facts with a per-call suffix, so that storing an exchange twice shows (in
    lower-case letters: a number or a name nobody said would not pass the
    grounding check)."""

    def __call__(self, exchange: Sequence[tuple[str, str]]) -> list[str]:
        return [f"{fact} #{_letters(uuid.uuid4())}" for fact in super().__call__(exchange)]


def _letters(value: uuid.UUID) -> str:
    return "".join(chr(ord("a") + int(digit, 16)) for digit in value.hex[:8])


def outbox_counts(folder: Path) -> dict[str, int]:
    """Pending and failed rows of the outbox in ``folder``, read by an outbox of its own."""
    with Outbox.in_folder(folder) as box:
        return box.counts()


def load_working(path: Path, user_id: str, conversation: str = "") -> WorkingRecord | None:
    """A working-memory record as a SQLite store of its own on ``path`` reads it."""
    store = SqliteWorkingStore(path)
    try:
        return store.load(user_id, conversation)
    finally:
        store.close()


HOST = "https://api.mem0.test"


KEY = "m0-test-key"


ENTITY_FIELDS = ("user_id", "agent_id", "app_id", "run_id")


FILTER_FIELDS = {*ENTITY_FIELDS, "metadata", "memory_ids", "created_at", "updated_at"}


LOGIC = ("AND", "OR", "NOT")


class BadRequest(Exception):
    """A request the platform answers with 400."""


@dataclass
class Record:
    """One stored memory."""

    id: str
    memory: str
    metadata: dict[str, Any]
    user_id: str | None = None
    agent_id: str | None = None
    app_id: str | None = None
    run_id: str | None = None
    created_at: str = "2026-01-01T00:00:00+00:00"

    def as_json(self, score: float | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "memory": self.memory,
            "metadata": self.metadata,
            "created_at": self.created_at,
            "updated_at": None,
            "categories": [],
            **{name: getattr(self, name) for name in ENTITY_FIELDS},
        }
        if score is not None:
            out["score"] = score
        return out


@dataclass
class Sent:
    """One request the platform received."""

    method: str
    path: str
    body: Any
    params: dict[str, str]
    headers: httpx.Headers


@dataclass
class FakePlatform:
    """The mem0 platform's HTTP API, in memory, as documented (see module docstring)."""

    keys: set[str] = field(default_factory=lambda: {KEY})
    records: list[Record] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    _failures: list[tuple[str, Callable[[httpx.Request], httpx.Response]]] = field(
        default_factory=list
    )

    # -- scripting ----------------------------------------------------------

    def fail(self, path: str, status: int, *, times: int = 1, detail: str = "") -> None:
        """Answer the next ``times`` requests to ``path`` with ``status``."""

        def answer(request: httpx.Request) -> httpx.Response:
            body = {"detail": detail or f"injected {status}"}
            headers = {"Retry-After": "1"} if status == 429 else {}
            return httpx.Response(status, json=body, headers=headers)

        self._failures += [(path, answer)] * times

    def disconnect(self, path: str, *, times: int = 1) -> None:
        """Drop the connection for the next ``times`` requests to ``path``."""

        def answer(request: httpx.Request) -> httpx.Response:
            raise httpx.ConnectError("connection refused", request=request)

        self._failures += [(path, answer)] * times

    def named(self, path: str) -> list[Sent]:
        return [s for s in self.sent if s.path == path]

    # -- transport ----------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content) if request.content else None
        path = request.url.path
        self.sent.append(
            Sent(request.method, path, body, dict(request.url.params), request.headers)
        )
        for i, (prefix, answer) in enumerate(self._failures):
            if path == prefix:
                del self._failures[i]
                return answer(request)
        if request.headers.get("Authorization") not in {f"Token {k}" for k in self.keys}:
            return httpx.Response(401, json={"detail": "Invalid API key"})
        try:
            return self._route(request.method, path, body, dict(request.url.params))
        except BadRequest as exc:
            return httpx.Response(400, json={"detail": str(exc)})

    def _route(self, method: str, path: str, body: Any, params: dict[str, str]) -> httpx.Response:
        if (method, path) == ("GET", "/v1/ping/"):
            return httpx.Response(
                200, json={"org_id": "org", "project_id": "proj", "user_email": "dev@x.test"}
            )
        if (method, path) == ("POST", "/v3/memories/add/"):
            return httpx.Response(200, json=self._add(body))
        if (method, path) == ("POST", "/v3/memories/search/"):
            return httpx.Response(200, json=self._search(body))
        if (method, path) == ("POST", "/v3/memories/"):
            found = [r.as_json() for r in self.records if matches(r, _filters(body))]
            return httpx.Response(
                200, json={"count": len(found), "next": None, "previous": None, "results": found}
            )
        if method == "DELETE" and path == "/v1/memories/":
            scope = {k: v for k, v in params.items() if k in ENTITY_FIELDS}
            if not scope:
                raise BadRequest("at least one entity id is required")
            self.records = [r for r in self.records if not _has(r, scope)]
            return httpx.Response(200, json={"message": "Memories deleted successfully!"})
        match = re.fullmatch(r"/v1/memories/([^/]+)/", path)
        record = next((r for r in self.records if match and r.id == match.group(1)), None)
        if method in ("GET", "PUT") and match and record is None:
            return httpx.Response(404, json={"detail": "Memory not found"})
        if method == "GET" and record is not None:
            return httpx.Response(200, json=record.as_json())
        if method == "PUT" and record is not None:
            # The platform takes the metadata it is sent as the memory's metadata.
            if "metadata" in body:
                record.metadata = dict(body["metadata"] or {})
            if "text" in body:
                record.memory = str(body["text"])
            return httpx.Response(200, json={"message": "Memory updated successfully!"})
        if method == "DELETE" and match:
            before = len(self.records)
            self.records = [r for r in self.records if r.id != match.group(1)]
            if len(self.records) == before:
                return httpx.Response(404, json={"detail": "Memory not found"})
            return httpx.Response(200, json={"message": "Memory deleted successfully!"})
        return httpx.Response(404, json={"detail": f"no route {method} {path}"})

    def _add(self, body: dict[str, Any]) -> dict[str, Any]:
        ids = {k: body.get(k) for k in ENTITY_FIELDS if body.get(k)}
        if not ids:
            raise BadRequest("at least one of user_id, agent_id, app_id, run_id is required")
        for message in body.get("messages") or []:
            role, text = message.get("role"), str(message.get("content") or "")
            # Each message lands in the entity space of its role.
            if role == "user" and ids.get("user_id"):
                owner = {"user_id": ids["user_id"]}
            elif role == "assistant" and ids.get("agent_id"):
                owner = {"agent_id": ids["agent_id"]}
            else:
                continue
            self.records.append(
                Record(
                    id=str(uuid.uuid4()),
                    memory=text,
                    metadata=dict(body.get("metadata") or {}),
                    app_id=ids.get("app_id"),
                    run_id=ids.get("run_id"),
                    **owner,
                )
            )
        event = {
            "message": "Memory processing has been queued for background execution",
            "status": "PENDING",
            "event_id": str(uuid.uuid4()),
        }
        return {"results": [event]}

    def _search(self, body: dict[str, Any]) -> dict[str, Any]:
        if any(k in body for k in ENTITY_FIELDS):
            raise BadRequest("entity ids must be passed inside `filters`")
        query = str(body.get("query") or "")
        top_k = body.get("top_k", 10)
        if not isinstance(top_k, int) or not 1 <= top_k <= 1000:
            raise BadRequest("top_k must be within 1..1000")
        threshold = body.get("threshold", 0.1)
        filters = _filters(body)
        scored = [
            (score, r)
            for r in self.records
            if matches(r, filters) and (score := word_similarity(query, r.memory)) >= threshold
        ]
        scored.sort(key=lambda pair: -pair[0])
        return {"results": [r.as_json(round(s, 4)) for s, r in scored[:top_k]]}


def _filters(body: Any) -> dict[str, Any]:
    filters = body.get("filters") if isinstance(body, dict) else None
    if not isinstance(filters, dict) or not filters:
        raise BadRequest("`filters` is required")
    if not mentioned(filters) & set(ENTITY_FIELDS):
        raise BadRequest("filters need at least one of user_id, agent_id, app_id, run_id")
    return filters


def mentioned(filters: Any) -> set[str]:
    """Every field a filter names, at any depth."""
    if isinstance(filters, list):
        return set().union(*(mentioned(f) for f in filters)) if filters else set()
    if not isinstance(filters, dict):
        return set()
    out: set[str] = set()
    for key, value in filters.items():
        if key in LOGIC:
            out |= mentioned(value)
        elif key in FILTER_FIELDS:
            out.add(key)
        else:
            raise BadRequest(f"unsupported filter field {key!r}")
    return out


def matches(record: Record, filters: dict[str, Any]) -> bool:
    """Whether ``record`` passes ``filters``, with implicit null scoping."""
    named = mentioned(filters)
    unnamed_null = all(getattr(record, f) is None for f in ENTITY_FIELDS if f not in named)
    return unnamed_null and _eval(record, filters)


def _eval(record: Record, filters: dict[str, Any]) -> bool:
    results = []
    for key, value in filters.items():
        if key == "AND":
            results.append(all(_eval(record, f) for f in value))
        elif key == "OR":
            results.append(any(_eval(record, f) for f in value))
        elif key == "NOT":
            results.append(not any(_eval(record, f) for f in value))
        elif key == "metadata":
            results.append(all(record.metadata.get(k) == v for k, v in value.items()))
        elif key == "memory_ids":
            results.append(record.id in value)
        elif key in ENTITY_FIELDS:
            results.append(_entity(getattr(record, key), value))
        else:
            raise BadRequest(f"the fake does not filter on {key!r}")
    return all(results)


def _entity(actual: str | None, wanted: Any) -> bool:
    if wanted == "*":
        return actual is not None
    if isinstance(wanted, dict):
        if "in" in wanted:
            return actual in wanted["in"]
        if "ne" in wanted:
            return actual != wanted["ne"]
        raise BadRequest(f"unsupported operator in {wanted!r}")
    return actual == wanted


def _has(record: Record, scope: dict[str, str]) -> bool:
    return all(getattr(record, k) == v for k, v in scope.items())


def word_similarity(query: str, text: str) -> float:
    q, t = (set(re.findall(r"[a-z0-9]+", s.lower())) for s in (query, text))
    return len(q & t) / math.sqrt(len(q) * len(t)) if q and t else 0.0


def hosted_client(platform: FakePlatform, key: str = KEY) -> Any:
    from mem0 import AsyncMemoryClient

    http = httpx.AsyncClient(transport=httpx.MockTransport(platform.handle))
    return AsyncMemoryClient(api_key=key, host=HOST, client=http)


class AppScriptedModel(ScriptedChatModel):
    """The scripted model as agentscope.app builds models: from a credential."""

    def __init__(
        self,
        credential: CredentialBase | None = None,
        model: str = "scripted",
        parameters: ChatModelBase.Parameters | None = None,
        **_: Any,
    ) -> None:
        super().__init__(recalled, name=model)


class ScriptedCredential(CredentialBase):
    """Registers the scripted model with agentscope.app through ``extra_credentials``."""

    type: Literal["agentscope_mem0_scripted"] = "agentscope_mem0_scripted"

    @classmethod
    def get_chat_model_class(cls) -> type[ChatModelBase]:
        return AppScriptedModel


class AppUser:
    def __init__(self, http: httpx.AsyncClient, user_id: str) -> None:
        self.http = http
        self.headers = {"X-User-ID": user_id}
        self.agent_id = ""
        self.credential_id = ""

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = await self.http.post(path, json=body, headers=self.headers)
        assert response.status_code in (200, 201), response.text
        return response.json()

    async def setup(self) -> None:
        cred = await self.post("/credential/", {"data": {"type": ScriptedCredential().type}})
        self.credential_id = cred["credential_id"]
        self.agent_id = (await self.post("/agent/", {"name": "assistant"}))["agent_id"]

    async def new_session(self, name: str) -> str:
        body = {
            "agent_id": self.agent_id,
            "name": name,
            "chat_model_config": {
                "type": ScriptedCredential().type,
                "credential_id": self.credential_id,
                "model": "scripted",
                "parameters": {},
            },
        }
        return (await self.post("/sessions/", body))["session_id"]

    async def chat(self, session_id: str, text: str) -> str:
        msg = UserMsg("user", text)
        await self.post(
            "/chat/",
            {
                "agent_id": self.agent_id,
                "session_id": session_id,
                "input": msg.model_dump(mode="json"),
            },
        )
        for _ in range(600):
            await asyncio.sleep(0.02)
            response = await self.http.get(
                f"/sessions/{session_id}/messages",
                params={"agent_id": self.agent_id},
                headers=self.headers,
            )
            page = response.json()
            ids = [m["id"] for m in page["messages"]]
            if not page["is_running"] and msg.id in ids:
                after = page["messages"][ids.index(msg.id) + 1 :]
                replies = [Msg.model_validate(m) for m in after if m["role"] == "assistant"]
                if replies:
                    return replies[-1].get_text_content() or ""
        raise AssertionError(f"no reply in session {session_id}; read the app's log")


def recalled(messages: Sequence[Msg], tools: Any = None) -> str:
    """A scripted reply that repeats the memory note the agent was given."""
    for msg in messages:
        for block in msg.content if isinstance(msg.content, list) else []:
            if isinstance(block, HintBlock) and block.hint.startswith(
                DEFAULT_MEMORY_SECTION_HEADER
            ):
                memories = [line for line in block.hint.splitlines() if line.startswith("- ")]
                return "Recalled: " + " | ".join(memories)
    return "Nothing recalled."


TARGET = "The Brompton is folded under the office desk"


LOOKALIKES = [
    "The user does keep the spare keys where the user can find them",
    "The user keeps old letters in the attic",
    "Where the user can keep things is in the kitchen drawer",
]


# Most memories mention the user and keeping things, as real ones do; they
# make "user" and "keep" common words and "Brompton" a rare one.
FILLER = [f"The user keeps reminder {i} for errand {i * 13}" for i in range(50)]


QUERY = "Where does the user keep the Brompton?"


def shard_records(path: Path, dims: int) -> list[Any]:
    """Every point of the closed Qdrant Edge shard folder ``path``, with payload and vectors."""
    from qdrant_edge import ScrollRequest

    from agentscope_mem0.local._edge import SharedShard

    shard = SharedShard(path, dims)
    try:
        records, _ = shard.call(
            "scroll",
            lambda s: s.scroll(ScrollRequest(limit=1000, with_payload=True, with_vector=True)),
        )
    finally:
        shard.close()
    return list(records)


@contextlib.contextmanager
def loop_turns() -> Iterator[list[int]]:
    """Count the running event loop's turns inside the block (in ``[0]``): each
    time a coroutine waits for another thread, it resumes a turn or more later."""
    loop = asyncio.get_running_loop()
    turns = [0]
    run_once = loop._run_once  # type: ignore[attr-defined]

    def counted() -> None:
        turns[0] += 1
        run_once()

    loop._run_once = counted  # type: ignore[attr-defined]
    try:
        yield turns
    finally:
        del loop._run_once  # type: ignore[attr-defined]


class BusyEmbedding(HashEmbedding):
    """An in-process embedder that refuses every query it may refuse."""

    accepts_background = True
    query_budget = 0.1

    def __init__(self, dimensions: int = 64) -> None:
        super().__init__(dimensions)
        self.calls: list[tuple[str | None, bool, bool]] = []

    def embed_blocking(
        self,
        texts: list[str],
        memory_action: str | None,
        *,
        background: bool = False,
        may_refuse: bool = False,
    ) -> list[list[float]]:
        self.calls.append((memory_action, background, may_refuse))
        if may_refuse:
            raise EmbedderBusyError("busy")
        return [self.vector(t) for t in texts]
