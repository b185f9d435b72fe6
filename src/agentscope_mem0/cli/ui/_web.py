"""The inspector's routes (Starlette), behind the :class:`~._security.Guard`.

GET pages only read. Every change is a POST whose form passes the guard's
CSRF check; forgetting asks first (a confirmation page posts again with
``confirm=yes``) and then redirects back (post/redirect/get). Every page sits
at the app's root and links relatively, so the app works mounted under a
path of another app (see :mod:`._mount`).
"""

from __future__ import annotations

import logging
import secrets
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from ..._exceptions import BackendError, ConfigurationError
from ..._scope import check_agent_id, check_user_id
from .._common import where
from . import _pages as pages
from ._inspector import Inspector, per_day
from ._security import Guard

if TYPE_CHECKING:
    from starlette.datastructures import FormData

__all__ = ["create_app"]

logger = logging.getLogger(__name__)

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
    if not value:
        return None
    try:
        return check_agent_id(value)
    except ConfigurationError as exc:
        raise _Refused(400, str(exc)) from exc


def _memory_id(value: str | None) -> str:
    try:
        return str(uuid.UUID(value or ""))
    except ValueError as exc:
        raise _Refused(400, f"{value!r} is not a memory id (a UUID)") from exc


class _Pages:
    """Request handlers; one instance per app."""

    def __init__(self, inspector: Inspector, guard: Guard) -> None:
        self.inspector = inspector
        self.guard = guard
        self.where = where(inspector.settings)
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
        return _see(pages.href(path, **params, flash=key))

    def _flash(self, request: Request) -> str | None:
        key = request.query_params.get("flash")
        return self._flashes.pop(key, None) if key else None

    @property
    def csrf(self) -> str:
        return self.guard.csrf

    def _html(self, title: str, body: str, status: int = 200, **notes: Any) -> HTMLResponse:
        return HTMLResponse(pages.page(title, body, where=self.where, **notes), status_code=status)

    async def _form(self, request: Request) -> FormData:
        form = await request.form()
        token = form.get("csrf")
        headers = {k.lower(): v for k, v in request.headers.items()}
        problem = self.guard.check_form(headers, token if isinstance(token, str) else None)
        if problem is not None:
            logger.warning("refused a %s to %s: %s", request.method, request.url.path, problem)
            raise _Refused(403, problem)
        return form

    # -- pages --------------------------------------------------------------

    async def home(self, request: Request) -> Response:
        if request.query_params.get("user") is not None:
            return await self.user(request)
        ins = self.inspector
        if not ins.lists_users:
            body = (
                "<p>The hosted platform lists memories per user: open "
                "<code>/?user=&lt;id&gt;</code>.</p>" + _user_picker()
            )
            return self._html("Users", body)
        overview = await ins.overview()
        latency = ins.search_latency_ms()
        outbox = ins.outbox()
        stats = [
            ("memories", overview.memories),
            ("users", len(overview.users)),
            ("agents", overview.agents),
            ("writes pending", len(outbox.pending)),
            ("writes failed", len(outbox.failed)),
            (
                f"searches here{'' if latency is None else f' (p50 {latency[0]:.0f} ms)'}",
                ins.counters["searches"],
            ),
        ]
        page, pages_total = _page_of(request, len(overview.users), _USERS_PAGE)
        shown = overview.users[(page - 1) * _USERS_PAGE : page * _USERS_PAGE]
        chart = ""
        if overview.per_day is not None:
            chart = "<h2>Memories per day (30 days)</h2>" + pages.per_day_svg(overview.per_day)
        body = (
            pages.counters(stats)
            + chart
            + "<h2>Users</h2>"
            + _user_picker()
            + pages.users_table(shown)
            + pages.pager("./", page, pages_total)
        )
        return self._html("Users", body, flash=self._flash(request))

    async def user(self, request: Request) -> Response:
        user = _user(request.query_params.get("user"))
        agent = _agent(request.query_params.get("agent"))
        show_all = bool(request.query_params.get("all"))
        views = await self.inspector.memories(user, agent)
        records = [v.record for v in views]
        current = [v for v in views if v.current]
        listed = views if show_all else current
        page, pages_total = _page_of(request, len(listed), _PAGE)
        shown = listed[(page - 1) * _PAGE : page * _PAGE]
        stats = [
            ("memories", len(views)),
            ("current", len(current)),
            ("superseded or duplicate", len(views) - len(current)),
        ]
        agents = await self.inspector.agents_of(user)
        body = (
            pages.user_tools(user, agent, agents, show_all)
            + pages.counters(stats)
            + pages.per_day_svg(per_day(records))
            + "<h2>Memories, newest first</h2>"
            + pages.memories_table(shown, user, self.csrf)
            + pages.pager("./", page, pages_total, user=user, agent=agent, all=show_all or None)
            + (pages.forget_user_form(user, len(views), self.csrf) if views else "")
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
        hits = await self.inspector.search(query, user, agent, top_k=top_k)
        body = (
            pages.search_form(user, query, agent, top_k)
            + f'<p><a href="{pages.href("./", user=user, agent=agent)}">All memories of '
            f"{pages.e(user)}</a></p>" + pages.hits_table(hits, user, self.csrf)
        )
        return self._html(f"Search {user}'s memories", body)

    async def memory(self, request: Request) -> Response:
        memory_id = _memory_id(request.query_params.get("id"))
        record, entries = await self.inspector.timeline(memory_id)
        if record is None and not entries:
            raise _Refused(404, f"no memory and no history with id {memory_id}")
        body = pages.memory_page(memory_id, record, entries, self.csrf)
        return self._html("A memory and its timeline", body)

    async def working(self, request: Request) -> Response:
        user = _user(request.query_params.get("user"))
        conversation = request.query_params.get("conversation") or None
        record, conversations, location = self.inspector.working(user, conversation)
        body = pages.working_page(user, conversation, record, conversations, location)
        title = f"Working memory of {user}" + (f", {conversation}" if conversation else "")
        return self._html(title, body)

    async def outbox(self, request: Request) -> Response:
        return self._html(
            "Write outbox",
            pages.outbox_body(self.inspector.outbox(), self.csrf),
            flash=self._flash(request),
        )

    async def style(self, request: Request) -> Response:
        return Response(pages.CSS, media_type="text/css")

    # -- actions ------------------------------------------------------------

    async def forget(self, request: Request) -> Response:
        form = await self._form(request)
        memory_id = _memory_id(_field(form, "memory_id"))
        user = _user(_field(form, "user"))
        back = pages.href("./", user=user)
        if _field(form, "confirm") != "yes":
            record = await self.inspector.get(memory_id)
            if record is None:
                raise _Refused(404, f"no memory with id {memory_id}")
            question = f"Forget this memory of {record.user_id or user}? “{record.text}”"
            body = pages.confirm(
                question, "forget", {"memory_id": memory_id, "user": user}, self.csrf, back
            )
            return self._html("Forget a memory?", body)
        forgotten = await self.inspector.forget(memory_id)
        if forgotten is None:
            raise _Refused(404, f"no memory with id {memory_id}")
        record, current_again = forgotten
        said = "".join(f" Current again: {other.text}" for other in current_again)
        return self._done("./", f"Forgot: {record.text}{said}", user=user)

    async def forget_user(self, request: Request) -> Response:
        form = await self._form(request)
        user = _user(_field(form, "user"))
        if _field(form, "confirm") != "yes":
            count = len(await self.inspector.memories(user))
            question = (
                f"Forget all {count} memories of user {user}, with their history? "
                "This cannot be undone."
            )
            body = pages.confirm(
                question, "forget-user", {"user": user}, self.csrf, pages.href("./", user=user)
            )
            return self._html("Forget every memory?", body)
        removed = await self.inspector.forget_user(user)
        return self._done("./", f"Forgot {removed} memories of {user}.")

    async def retry(self, request: Request) -> Response:
        form = await self._form(request)
        user = _field(form, "user") or None
        count = self.inspector.retry_failed(_user(user) if user else None)
        return self._done("outbox", f"Requeued {count} failed writes.")


def _page_of(request: Request, count: int, size: int) -> tuple[int, int]:
    """The page asked for (1-based, clamped) and how many pages ``count`` rows make."""
    total = max(1, -(-count // size))
    try:
        page = int(request.query_params.get("page") or 1)
    except ValueError as exc:
        raise _Refused(400, "page must be a whole number") from exc
    return min(max(page, 1), total), total


def _field(form: FormData, name: str) -> str | None:
    value = form.get(name)
    return value if isinstance(value, str) else None


def _see(location: str) -> RedirectResponse:
    # ``href`` escaped it for an attribute; a Location header wants it raw.
    import html

    return RedirectResponse(html.unescape(location), status_code=303)


def _user_picker() -> str:
    return (
        '<form method="get" action="./" class="bar"><label>Open a user <input type="text" '
        'name="user" required aria-label="user id"></label> <button type="submit">Open</button>'
        "</form>"
    )


def create_app(inspector: Inspector, *, token: str | None, loopback: bool) -> Guard:
    """The inspector as an ASGI app: the routes wrapped in the guard.

    Args:
        inspector: The store to show.
        token: The access token every request must carry; ``None`` for none.
        loopback: Whether the server listens on a loopback address only.
    """
    holder: dict[str, _Pages] = {}

    async def refused(request: Request, exc: Exception) -> Response:
        view = holder["pages"]
        if isinstance(exc, _Refused):
            return view._html(
                "Refused" if exc.status == 403 else "Not possible", "", exc.status, error=str(exc)
            )
        logger.warning("the store failed: %s", exc)
        return view._html("The memory store failed", "", 502, error=str(exc))

    app = Starlette(
        exception_handlers={_Refused: refused, BackendError: refused, RuntimeError: refused}
    )
    guard = Guard(app, token=token, loopback=loopback)
    view = holder["pages"] = _Pages(inspector, guard)
    for path, endpoint, methods in (
        ("/", view.home, ["GET"]),
        ("/search", view.search, ["GET"]),
        ("/memory", view.memory, ["GET"]),
        ("/working", view.working, ["GET"]),
        ("/outbox", view.outbox, ["GET"]),
        ("/style.css", view.style, ["GET"]),
        ("/forget", view.forget, ["POST"]),
        ("/forget-user", view.forget_user, ["POST"]),
        ("/outbox-retry", view.retry, ["POST"]),
    ):
        app.router.routes.append(Route(path, endpoint, methods=methods))
    return guard
