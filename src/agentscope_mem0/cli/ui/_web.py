"""The inspector's routes (Starlette), behind the :class:`~._security.Guard`,
on the store the commands use (:class:`~.._mem0_store.MemoryStore`).

GET pages only read; a user's page with ``as_of`` lists what was current
then, by the rule every ``as_of`` read uses. Every change is a POST whose
form passes the guard's CSRF check; forgetting asks first (a confirmation
page posts again with ``confirm=yes``), and every change then redirects back
(post/redirect/get); saving or clearing the profile does what
``agentscope-mem0 profile --edit`` or ``--clear`` does, through the same
function. Every page sits at the app's root and links relatively, so the app
works mounted under a path of another app (see :mod:`._serve`).
"""

from __future__ import annotations

import asyncio
import html
import logging
import secrets
import statistics
import time
import uuid
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from ..._exceptions import BackendError, ConfigurationError, PermanentBackendError
from ..._mem0.errors import mapped_errors
from ..._memories.hit import MemoryHit
from ..._memories.lifecycle import event_date_of, valid_until_of
from ..._memories.validity import check_as_of, current_as_of, said_of
from ..._scope import Scope, check_agent_id, check_user_id
from ..._text.dates import parse_time
from .._common import where
from .._output import short_date
from .._profile import change_profile, edit_problem
from .._queued_writes import outbox_path, read_rows, requeue_failed
from .._records import timeline_links
from . import _pages as pages
from ._security import Guard

if TYPE_CHECKING:
    from starlette.datastructures import FormData

    from .._mem0_store import MemoryStore
    from .._records import MemoryRecord

__all__ = ["create_app", "per_day"]

logger = logging.getLogger(__name__)

AgentNames = Callable[[str, Sequence[str]], Awaitable[dict[str, str]]]
"""Looks up agents' names: ``(user_id, agent ids) -> {agent id: name}``."""

_MAX_TOP_K = 100
_PAGE = 100
"""Memories a user page lists per page."""
_USERS_PAGE = 100
"""Users the home page lists per page."""
_FLASHES = 64
"""Messages kept for the page a POST redirects to (the newest win)."""


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def _user(value: str | None) -> str:
    try:
        return check_user_id(value)
    except ConfigurationError as exc:
        raise _Refused(400, str(exc)) from exc


def _agent(value: str | None) -> str | None:
    try:
        return check_agent_id(value) if value else None
    except ConfigurationError as exc:
        raise _Refused(400, str(exc)) from exc


def _memory_id(value: str | None) -> str:
    try:
        return str(uuid.UUID(value or ""))
    except ValueError as exc:
        raise _Refused(400, f"{value!r} is not a memory id (a UUID)") from exc


def _as_of(value: str | None) -> datetime | None:
    """The ``as_of`` of a query, as the CLI's ``search --as-of`` reads it; ``None`` without one."""
    if value is None:
        return None
    try:
        return check_as_of(value)
    except ConfigurationError as exc:
        raise _Refused(400, str(exc)) from exc


def _current_then(records: list[MemoryRecord], moment: datetime) -> list[pages.DatedMemory]:
    """The memories of ``records`` that were current at ``moment``, by the rule
    every ``as_of`` read uses (:func:`~agentscope_mem0._memories.validity.current_as_of`),
    with their dates."""
    found = []
    for record in records:
        hit = MemoryHit(
            id=record.id,
            memory=record.text,
            created_at=record.created_at,
            updated_at=record.updated_at,
            metadata=record.metadata,
            agent_id=record.agent_id,
        )
        if current_as_of(hit, moment):
            said = said_of(hit)
            found.append(
                pages.DatedMemory(
                    record,
                    said=said.isoformat() if said else None,
                    happened=event_date_of(hit),
                    valid_until=valid_until_of(hit),
                )
            )
    return found


def per_day(
    records: list[MemoryRecord], *, days: int = 30, today: date | None = None
) -> list[tuple[date, int]]:
    """Memories created on each of the last ``days`` days, oldest first."""
    end = today or datetime.now(UTC).date()
    created = (parse_time(r.created_at) for r in records)
    counts = Counter(when.date() for when in created if when is not None)
    return [(day, counts[day]) for day in (end - timedelta(n) for n in range(days - 1, -1, -1))]


def _users(records: list[MemoryRecord]) -> list[pages.UserSummary]:
    """The users among ``records``, the most recently written first."""
    by_user: dict[str, list[MemoryRecord]] = {}
    for record in records:
        if record.user_id:
            by_user.setdefault(record.user_id, []).append(record)
    found = [
        pages.UserSummary(
            user_id=user,
            memories=sum(1 for r in rows if not r.hidden),
            agents=tuple(sorted({r.agent_id for r in rows if r.agent_id})),
            last_write=max(r.date or "" for r in rows) or None,
        )
        for user, rows in by_user.items()
    ]
    return sorted(found, key=lambda u: (u.last_write or "", u.user_id), reverse=True)


class _Pages:
    """Request handlers; one instance per app.

    Args:
        store: The store to show; its opener closes it.
        agent_names: Looks up agents' names (service mode); ``None``: ids only.
    """

    def __init__(self, store: MemoryStore, agent_names: AgentNames | None = None) -> None:
        self.store = store
        self._agent_names = agent_names
        self.guard: Guard
        self.where = where(store.settings)
        self._search_seconds: list[float] = []
        # What an action did, shown once by the page it redirects to. The URL
        # carries a random key, never the text: a link cannot make the page
        # say something this server did not.
        self._flashes: OrderedDict[str, str] = OrderedDict()

    def _done(self, path: str, message: str, **params: Any) -> RedirectResponse:
        """Redirect to ``path`` (post/redirect/get), which shows ``message`` once."""
        key = secrets.token_urlsafe(12)
        self._flashes[key] = message
        while len(self._flashes) > _FLASHES:
            self._flashes.popitem(last=False)
        # ``href`` escaped it for an attribute; a Location header wants it raw.
        location = html.unescape(pages.href(path, **params, flash=key))
        return RedirectResponse(location, status_code=303)

    def _flash(self, request: Request) -> str | None:
        key = request.query_params.get("flash")
        return self._flashes.pop(key, None) if key else None

    @property
    def csrf(self) -> str:
        return self.guard.csrf

    def _html(self, title: str, body: str, status: int = 200, **notes: Any) -> HTMLResponse:
        return HTMLResponse(pages.page(title, body, where=self.where, **notes), status_code=status)

    async def _form(self, request: Request) -> dict[str, str]:
        form: FormData = await request.form()
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        headers = {k.lower(): v for k, v in request.headers.items()}
        problem = self.guard.csrf_problem(headers, fields.get("csrf"))
        if problem is not None:
            logger.warning("refused a %s to %s: %s", request.method, request.url.path, problem)
            raise _Refused(403, problem)
        return fields

    async def refused(self, request: Request, exc: Exception) -> Response:
        if isinstance(exc, _Refused):
            title = "Refused" if exc.status == 403 else "Not possible"
            return self._html(title, "", exc.status, error=str(exc))
        logger.warning("the store failed: %s", exc)
        return self._html("The memory store failed", "", 502, error=str(exc))

    async def _names(self, user: str, agent_ids: Sequence[str | None]) -> dict[str, str]:
        """The names of ``user``'s agents that the lookup knows (none without one)."""
        wanted = sorted({a for a in agent_ids if a})
        if self._agent_names is None or not wanted:
            return {}
        try:
            return await self._agent_names(user, wanted)
        except Exception as exc:  # a name is a nicety: the page shows ids instead
            logger.warning("could not look up the agents' names: %s", exc)
            return {}

    # -- pages --------------------------------------------------------------

    async def home(self, request: Request) -> Response:
        if request.query_params.get("user") is not None:
            return await self.user(request)
        if self.store.hosted:
            body = (
                "<p>The hosted platform lists memories per user: open "
                "<code>/?user=&lt;id&gt;</code>.</p>" + pages.user_picker()
            )
            return self._html("Users", body)
        # On Qdrant Edge the engine's payload index counts (a count and two
        # facets), so the page does not read every memory; elsewhere it does.
        chart = ""
        users_of = await self.store.facet("user_id")
        if users_of is None:
            records = await self.store.records(None)
            total, users = len(records), _users(records)
            current = sum(1 for r in records if not r.hidden)
            agents = len({r.agent_id for r in records if r.agent_id})
            chart = "<h2>Memories per day (30 days)</h2>" + pages.per_day_svg(per_day(records))
        else:
            total = await self.store.count(None)
            current = await self.store.count(None, current_only=True)
            current_of = await self.store.facet("user_id", current_only=True) or {}
            # The facets still name a value whose memories were all deleted, with 0.
            users = [
                pages.UserSummary(u, current_of.get(u, 0))
                for u, n in users_of.items()
                if u and n > 0
            ]
            users.sort(key=lambda u: (-u.memories, u.user_id))
            agents_of = await self.store.facet("agent_id") or {}
            agents = sum(1 for agent, n in agents_of.items() if agent and n > 0)
        rows = read_rows(outbox_path(self.store.settings)) or []
        searches = "searches here"
        if self._search_seconds:
            searches += f" (p50 {statistics.median(self._search_seconds) * 1000:.0f} ms)"
        stats = [
            # What agents read: a superseded memory or a repeat is kept, not counted.
            ("memories", current),
            ("hidden: superseded or repeats", total - current),
            ("users", len(users)),
            ("agents", agents),
            ("writes pending", sum(r.status == "pending" for r in rows)),
            ("writes failed", sum(r.status == "failed" for r in rows)),
            (searches, len(self._search_seconds)),
        ]
        page, pages_total = _page_of(request, len(users), _USERS_PAGE)
        body = (
            pages.counters(stats)
            + chart
            + "<h2>Users</h2>"
            + pages.user_picker()
            + pages.users_table(users[(page - 1) * _USERS_PAGE : page * _USERS_PAGE])
            + pages.pager("./", page, pages_total)
        )
        return self._html("Users", body, flash=self._flash(request))

    async def user(self, request: Request) -> Response:
        user = _user(request.query_params.get("user"))
        agent = _agent(request.query_params.get("agent"))
        as_of = (request.query_params.get("as_of") or "").strip() or None
        moment = _as_of(as_of)
        show_all = bool(request.query_params.get("all")) and moment is None
        records = await self.store.records(Scope(user, agent))
        records.sort(key=lambda r: (r.date or "", r.id), reverse=True)
        current = [r for r in records if not r.hidden]
        stats = [
            ("memories", len(records)),
            ("current", len(current)),
            ("superseded or duplicate", len(records) - len(current)),
        ]
        everyone = records if agent is None else await self.store.records(Scope(user))
        agents = sorted({r.agent_id for r in everyone if r.agent_id})
        links = timeline_links(records)
        names = await self._names(user, agents)
        try:
            profile = await self.store.profile(user)
        except Exception as exc:  # the page shows the memories all the same
            logger.warning("profile of user %s not read: %r", user, exc)
            profile = None
        if moment is None:
            listed = records if show_all else current
            page, pages_total = _page_of(request, len(listed), _PAGE)
            shown = listed[(page - 1) * _PAGE : page * _PAGE]
            listing = "<h2>Memories, newest first</h2>" + pages.memories_table(
                shown, links, user, self.csrf, pages.event_dates(records), names
            )
        else:
            then = _current_then(records, moment)
            page, pages_total = _page_of(request, len(then), _PAGE)
            # A day alone means the end of that day (check_as_of): say the day.
            day = len(as_of or "") == 10
            when = f"the end of {as_of}" if day else short_date(moment.isoformat())
            listing = pages.as_of_listing(
                then[(page - 1) * _PAGE : page * _PAGE], when, links, user, self.csrf, names
            )
        body = (
            pages.user_tools(user, agent, agents, show_all, names, as_of)
            + pages.profile_section(profile, user, self.csrf)
            + pages.counters(stats)
            + pages.per_day_svg(per_day(records))
            + listing
            + pages.pager(
                "./", page, pages_total, user=user, agent=agent, all=show_all or None, as_of=as_of
            )
            + (pages.forget_user_form(user, len(records), self.csrf) if records else "")
        )
        title = f"Memories of {user}" + (f" (agent {agent})" if agent else "")
        return self._html(title, body, flash=self._flash(request))

    async def search(self, request: Request) -> Response:
        user = _user(request.query_params.get("user"))
        agent = _agent(request.query_params.get("agent"))
        query = (request.query_params.get("q") or "").strip()
        try:
            top_k = max(1, min(int(request.query_params.get("k") or 10), _MAX_TOP_K))
        except ValueError as exc:
            raise _Refused(400, "k must be a whole number") from exc
        if not query:
            raise _Refused(400, "the search query is empty")
        started = time.perf_counter()
        hits = await self.store.search(
            query, Scope(user, agent), top_k=top_k, threshold=None, show_all=False
        )
        self._search_seconds.append(time.perf_counter() - started)
        body = (
            pages.search_form(user, query, agent, top_k)
            + f'<p><a href="{pages.href("./", user=user, agent=agent)}">All memories of '
            f"{pages.e(user)}</a></p>" + pages.hits_table(hits, user, self.csrf)
        )
        return self._html(f"Search {user}'s memories", body)

    async def memory(self, request: Request) -> Response:
        memory_id = _memory_id(request.query_params.get("id"))
        record, entries = await self.store.history(memory_id)
        if record is None and not entries:
            raise _Refused(404, f"no memory and no history with id {memory_id}")
        names = await self._names(record.user_id or "", [record.agent_id]) if record else {}
        body = pages.memory_page(memory_id, record, entries, self.csrf, names)
        return self._html("A memory and its timeline", body)

    async def working(self, request: Request) -> Response:
        from .._working_memory import open_working_store

        user = _user(request.query_params.get("user"))
        conversation = request.query_params.get("conversation") or None
        store = open_working_store(self.store.settings)
        try:
            record = store.load(user, conversation or "")
            body = pages.working_page(
                user, conversation, record, store.conversations(user), store.location
            )
        finally:
            store.close()
        title = f"Working memory of {user}" + (f", {conversation}" if conversation else "")
        return self._html(title, body)

    async def outbox(self, request: Request) -> Response:
        path = outbox_path(self.store.settings)
        body = pages.outbox_body(path, read_rows(path), self.csrf)
        return self._html("Write outbox", body, flash=self._flash(request))

    async def style(self, request: Request) -> Response:
        return Response(pages.CSS, media_type="text/css")

    # -- actions ------------------------------------------------------------

    async def forget(self, request: Request) -> Response:
        form = await self._form(request)
        memory_id = _memory_id(form.get("memory_id"))
        user = _user(form.get("user"))
        record = await self.store.get(memory_id)
        if record is None:
            raise _Refused(404, f"no memory with id {memory_id}")
        if form.get("confirm") != "yes":
            question = f"Forget this memory of {record.user_id or user}? “{record.text}”"
            fields = {"memory_id": memory_id, "user": user}
            back = pages.href("./", user=user)
            body = pages.confirm(question, "forget", fields, self.csrf, back)
            return self._html("Forget a memory?", body)
        _, current_again, repeats = await self.store.forget(record)
        said = "".join(f" Forgot its repeat too: {other.text}" for other in repeats)
        said += "".join(f" Current again: {other.text}" for other in current_again)
        return self._done("./", f"Forgot: {record.text}{said}", user=user)

    async def forget_user(self, request: Request) -> Response:
        form = await self._form(request)
        user = _user(form.get("user"))
        records = await self.store.records(Scope(user))
        if form.get("confirm") != "yes":
            question = (
                f"Forget all {len(records)} memories of user {user}, with their history? "
                "This cannot be undone."
            )
            back = pages.href("./", user=user)
            body = pages.confirm(question, "forget-user", {"user": user}, self.csrf, back)
            return self._html("Forget every memory?", body)
        if records:
            *_, left = await self.store.forget_all(Scope(user), records)
            if left:
                raise PermanentBackendError(f"{left} memories of user {user!r} remain; try again")
        return self._done("./", f"Forgot {len(records)} memories of {user}.")

    async def save_profile(self, request: Request) -> Response:
        form = await self._form(request)
        user = _user(form.get("user"))
        text = form.get("text") or ""
        problem = edit_problem(text)
        if problem is not None:
            raise _Refused(400, problem)
        # What `agentscope-mem0 profile USER --edit TEXT` stores, the same way.
        with mapped_errors("save the profile"):
            record = await asyncio.to_thread(change_profile, self.store.settings, user, text=text)
        version = f" (version {record.version})" if record is not None else ""
        return self._done("./", f"Saved the profile of {user}{version}.", user=user)

    async def clear_profile(self, request: Request) -> Response:
        form = await self._form(request)
        user = _user(form.get("user"))
        # What `agentscope-mem0 profile USER --clear` does.
        with mapped_errors("clear the profile"):
            await asyncio.to_thread(change_profile, self.store.settings, user, clear=True)
        said = f"Cleared the profile of {user}; it is distilled again after new writes."
        return self._done("./", said, user=user)

    async def retry(self, request: Request) -> Response:
        form = await self._form(request)
        user = _user(form["user"]) if form.get("user") else None
        path = outbox_path(self.store.settings)
        count = requeue_failed(path, user) if path.exists() else 0
        return self._done("outbox", f"Requeued {count} failed writes.")


def _page_of(request: Request, count: int, size: int) -> tuple[int, int]:
    """The page asked for (1-based, clamped) and how many pages ``count`` rows make."""
    total = max(1, -(-count // size))
    try:
        page = int(request.query_params.get("page") or 1)
    except ValueError as exc:
        raise _Refused(400, "page must be a whole number") from exc
    return min(max(page, 1), total), total


def create_app(
    store: MemoryStore, *, token: str | None, agent_names: AgentNames | None = None
) -> Guard:
    """The inspector of ``store`` as an ASGI app: the routes wrapped in the guard.

    Args:
        store: The store to show; the caller closes it.
        token: The access token every request must carry; ``None`` answers
            requests from this machine only.
        agent_names: ``await agent_names(user_id, agent_ids)`` gives the names
            of those agents it knows (a service's agent records); without it
            the pages show agent ids.
    """
    view = _Pages(store, agent_names)
    routes = [
        Route("/", view.home, methods=["GET"]),
        Route("/search", view.search, methods=["GET"]),
        Route("/memory", view.memory, methods=["GET"]),
        Route("/working", view.working, methods=["GET"]),
        Route("/outbox", view.outbox, methods=["GET"]),
        Route("/style.css", view.style, methods=["GET"]),
        Route("/forget", view.forget, methods=["POST"]),
        Route("/forget-user", view.forget_user, methods=["POST"]),
        Route("/profile-save", view.save_profile, methods=["POST"]),
        Route("/profile-clear", view.clear_profile, methods=["POST"]),
        Route("/outbox-retry", view.retry, methods=["POST"]),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={
            _Refused: view.refused,
            BackendError: view.refused,
            # Searching builds mem0 and the embedder: a missing extra says how to fix it.
            ConfigurationError: view.refused,
        },
    )
    view.guard = Guard(app, token=token)
    return view.guard
