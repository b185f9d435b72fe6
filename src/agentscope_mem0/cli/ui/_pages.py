"""The inspector's HTML: plain server-rendered pages, no script, no outside assets.

Every value that comes from the store or the request goes through :func:`e`
(HTML escaping, quotes included) or :func:`href` (URL encoding, then
escaping); nothing else is interpolated into markup.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from ..._memories.lifecycle import DUPLICATE_OF, DUPLICATES, EVENT_DATE, VALID_UNTIL, ids_of
from .._output import short_date
from .._profile import PROFILE_MAX_CHARS

if TYPE_CHECKING:
    from pathlib import Path

    from .._queued_writes import PostgresPlace, WriteRow
    from .._records import MemoryRecord

__all__ = ["CSS", "DatedMemory", "UserSummary", "e", "href", "page"]

CSS = """
*{box-sizing:border-box}
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
header{background:#243447;color:#fff;padding:.6em 1.2em;display:flex;flex-wrap:wrap;
  gap:.4em 1.4em;align-items:baseline}
header a{color:#cfe3ff;text-decoration:none}header b{font-size:1.1em}
header span{color:#aebdd0;font-size:.85em;overflow-wrap:anywhere}
main{padding:1em 1.4em}
h1{font-size:1.35em;overflow-wrap:anywhere}h2{font-size:1.1em;margin:1.2em 0 .4em}
table{border-collapse:collapse;width:100%;background:#fff;margin:.6em 0 1.2em}
th,td{border-bottom:1px solid #e3e6ea;padding:.35em .55em;text-align:left;vertical-align:top}
th{background:#eef1f4;font-weight:600;white-space:nowrap}
td.text{white-space:pre-wrap;overflow-wrap:anywhere;width:60%}
td.when,td.num{white-space:nowrap}
code,.id{font:12px ui-monospace,monospace;color:#56606b}
tr.superseded td.text{text-decoration:line-through;color:#7a828a}
.tag{display:inline-block;white-space:nowrap;font-size:12px;border-radius:3px;padding:0 .35em;
  margin:.15em .2em 0 0;background:#e8eef7}
.tag.old{background:#f6e3e3}.tag.new{background:#e2f2e5}
form.inline{display:inline}
.bar{display:flex;flex-wrap:wrap;gap:.4em .8em;align-items:center;margin:.5em 0}
button{font:inherit;padding:.15em .7em;cursor:pointer}
button.danger{background:#b3261e;color:#fff;border:1px solid #8c1d17;border-radius:3px}
.flash{background:#e2f2e5;border:1px solid #9ccfa6;padding:.5em .8em;margin:.5em 0}
.error{background:#fbe9e7;border:1px solid #e0a39b;padding:.5em .8em;margin:.5em 0}
.counters{display:flex;flex-wrap:wrap;gap:.6em;margin:.6em 0}
.counters div{background:#fff;border:1px solid #e3e6ea;padding:.4em .8em;min-width:7em}
.counters b{display:block;font-size:1.3em}
input[type=text],input[type=search]{font:inherit;padding:.2em .4em;min-width:0;width:18em;
  max-width:100%}
input[type=number]{width:4em}
svg{background:#fff;border:1px solid #e3e6ea;width:100%;max-width:40em;height:auto}
textarea{font:13px ui-monospace,monospace;width:100%;max-width:50em;padding:.4em}
pre.working{background:#fff;border:1px solid #e3e6ea;padding:.8em;white-space:pre-wrap;
  overflow-wrap:anywhere}
nav.pager{margin:.4em 0 1em}
@media (max-width:640px){
  main{padding:.6em}
  table.rows thead{display:none}
  table.rows tr{display:block;border-bottom:2px solid #e3e6ea;padding:.3em 0}
  table.rows td{display:block;border:0;padding:.1em .5em;width:auto}
  table.rows td[data-label]::before{content:attr(data-label) ": ";color:#56606b;font-size:.85em}
}
"""

# How each timeline link is tagged on a memory.
_LINK_TAGS = {
    "SUPERSEDED_BY": ("superseded by", "tag old"),
    "SUPERSEDES": ("supersedes", "tag new"),
    "EXTENDS": ("extends", "tag"),
    "EXTENDED_BY": ("extended by", "tag"),
    "DUPLICATE_OF": ("repeat of", "tag old"),
    "DUPLICATES": ("merged", "tag"),
}


@dataclass(frozen=True)
class UserSummary:
    """One user of the store, as the users page lists it."""

    user_id: str
    memories: int
    agents: tuple[str, ...] = ()
    last_write: str | None = None


def e(value: Any) -> str:
    """``value`` as HTML text (``None`` as a dash)."""
    return "-" if value is None else html.escape(str(value), quote=True)


def href(path: str, **params: Any) -> str:
    """A link to ``path`` with query ``params`` (``None`` left out), escaped for an attribute."""
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return html.escape(path + (f"?{query}" if query else ""), quote=True)


def page(
    title: str, body: str, *, where: str, flash: str | None = None, error: str | None = None
) -> str:
    """A whole page around ``body`` (already HTML)."""
    notes = ""
    if flash:
        notes += f'<p class="flash" role="status">{e(flash)}</p>'
    if error:
        notes += f'<p class="error" role="alert">{e(error)}</p>'
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width,initial-scale=1">'
        f'<title>{e(title)} · agentscope-mem0</title><link rel="stylesheet" href="style.css">'
        "</head><body><header><b>agentscope-mem0</b>"
        f'<a href="./">Users</a><a href="outbox">Outbox</a><span>{e(where)}</span></header>'
        f"<main><h1>{e(title)}</h1>{notes}{body}</main></body></html>"
    )


def user_picker() -> str:
    """The box that opens a user's page by id."""
    return (
        '<form method="get" action="./" class="bar"><label>Open a user <input type="text" '
        'name="user" required aria-label="user id"></label> <button type="submit">Open</button>'
        "</form>"
    )


def _csrf(token: str) -> str:
    return f'<input type="hidden" name="csrf" value="{e(token)}">'


def counters(items: Iterable[tuple[str, Any]]) -> str:
    """A row of labelled numbers."""
    cells = "".join(f"<div><b>{e(v)}</b>{e(k)}</div>" for k, v in items)
    return f'<div class="counters" id="counters">{cells}</div>'


def per_day_svg(days: Sequence[tuple[date, int]], *, width: int = 620, height: int = 130) -> str:
    """An inline SVG bar chart of memories per day."""
    if not days:
        return ""
    top = max(count for _, count in days) or 1
    pad, base = 28, height - 22
    bar = (width - pad - 6) / len(days)
    parts = [
        f'<svg id="per-day" role="img" aria-label="memories per day" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" xmlns="http://www.w3.org/2000/svg">',
        f'<line x1="{pad}" y1="{base}" x2="{width - 4}" y2="{base}" stroke="#9aa3ad"/>',
        f'<text x="{pad - 4}" y="14" font-size="11" text-anchor="end" fill="#56606b">{top}</text>',
        f'<text x="{pad - 4}" y="{base}" font-size="11" text-anchor="end" fill="#56606b">0</text>',
    ]
    for index, (day, count) in enumerate(days):
        h = (base - 10) * count / top
        x = pad + index * bar + 1
        parts.append(
            f'<rect class="day" data-day="{day.isoformat()}" data-count="{count}" x="{x:.1f}" '
            f'y="{base - h:.1f}" width="{max(bar - 2, 1):.1f}" height="{h:.1f}" fill="#4a7bb7">'
            f"<title>{day.isoformat()}: {count}</title></rect>"
        )
    first, last = days[0][0].isoformat(), days[-1][0].isoformat()
    parts.append(f'<text x="{pad}" y="{height - 6}" font-size="11" fill="#56606b">{first}</text>')
    parts.append(
        f'<text x="{width - 4}" y="{height - 6}" font-size="11" text-anchor="end" '
        f'fill="#56606b">{last}</text></svg>'
    )
    return "".join(parts)


def short_id(memory_id: str) -> str:
    """The first 8 characters of an id, the whole id on hover."""
    return f'<span class="id" title="{e(memory_id)}">{e(memory_id[:8])}</span>'


def _table(table_id: str, heads: Sequence[str], rows: Iterable[str], *, cards: bool = True) -> str:
    """A table; ``cards``: each row a card on a narrow window."""
    head = "".join(f"<th>{h}</th>" for h in heads)
    css = ' class="rows"' if cards else ""
    return (
        f'<table id="{table_id}"{css}><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def pager(path: str, page: int, pages: int, **params: Any) -> str:
    """Previous / next links when there is more than one page."""
    if pages <= 1:
        return ""
    links = []
    if page > 1:
        links.append(f'<a href="{href(path, **params, page=page - 1)}" rel="prev">← newer</a>')
    links.append(f"page {page} of {pages}")
    if page < pages:
        links.append(f'<a href="{href(path, **params, page=page + 1)}" rel="next">older →</a>')
    return f'<nav class="pager bar" id="pager">{" ".join(links)}</nav>'


def users_table(users: Sequence[UserSummary]) -> str:
    """The users page's table: memories per user, and agents and last write when known."""
    if not users:
        return "<p>No memories stored yet.</p>"
    detailed = any(u.agents or u.last_write for u in users)
    rows = []
    for u in users:
        cells = (
            f'<td><a class="user" href="{href("./", user=u.user_id)}">{e(u.user_id)}</a></td>'
            f'<td class="num" data-label="memories">{u.memories}</td>'
        )
        if detailed:
            cells += (
                f'<td data-label="agents">{", ".join(map(agent_label, u.agents)) or "-"}</td>'
                f'<td class="when" data-label="last write">{e(short_date(u.last_write))}</td>'
            )
        rows.append(f"<tr>{cells}</tr>")
    heads = ["User", "Current memories", *(("Agents", "Last write") if detailed else ())]
    return _table("users", heads, rows)


def search_form(user: str, query: str = "", agent: str | None = None, top_k: int = 10) -> str:
    """The search box of a user page."""
    return (
        '<form method="get" action="search" id="search-form" class="bar">'
        f'<input type="hidden" name="user" value="{e(user)}">'
        + (f'<input type="hidden" name="agent" value="{e(agent)}">' if agent else "")
        + f'<input type="search" name="q" value="{e(query)}" placeholder="search memories" '
        f'aria-label="query" required> <label>top <input type="number" name="k" min="1" '
        f'max="100" value="{top_k}"></label> '
        '<button type="submit">Search</button></form>'
    )


def as_of_form(user: str, agent: str | None = None, as_of: str | None = None) -> str:
    """The date box of a user page: what was current then (``as_of``), or now."""
    day = as_of if as_of is not None and len(as_of) == 10 else ""
    now = f' <a id="as-of-now" href="{href("./", user=user, agent=agent)}">now</a>' if as_of else ""
    return (
        '<form method="get" action="./" id="as-of-form" class="bar">'
        f'<input type="hidden" name="user" value="{e(user)}">'
        + (f'<input type="hidden" name="agent" value="{e(agent)}">' if agent else "")
        + f'<label>Current as of <input type="date" name="as_of" value="{e(day)}" '
        'aria-label="as of date" required></label> <button type="submit">Show</button>'
        f"{now}</form>"
    )


def user_tools(
    user: str,
    agent: str | None,
    agents: Sequence[str],
    show_all: bool,
    names: Mapping[str, str] | None = None,
    as_of: str | None = None,
) -> str:
    """A user page's search box, as-of date box, agent filter, superseded toggle
    and working-memory link."""
    choices = [("every agent", None), *((agent_label(name, names), name) for name in agents)]
    filters = " ".join(
        f"<b>{label}</b>"
        if value == agent
        else (
            f'<a href="{href("./", user=user, agent=value, all=show_all or None, as_of=as_of)}">'
            f"{label}</a>"
        )
        for label, value in choices
    )
    toggle = (
        f'<a id="toggle-superseded" href="{href("./", user=user, agent=agent)}">'
        "hide superseded and duplicates</a>"
        if show_all
        else f'<a id="toggle-superseded" href="{href("./", user=user, agent=agent, all=1)}">'
        "show superseded and duplicates</a>"
    )
    working = f'<a id="working-link" href="{href("working", user=user)}">working memory</a>'
    return (
        search_form(user, agent=agent)
        + as_of_form(user, agent, as_of)
        + f'<div class="bar" id="agents">Agents: {filters}</div>'
        + f'<div class="bar">{toggle} · {working}</div>'
    )


def _relations(record: MemoryRecord, links: list[tuple[str, str]], event_date: str | None) -> str:
    """Tags for what supersedes, extends or repeats what, and the dates the judge set.

    A repeat is tagged as one only: the date its merging set (``valid_until``)
    and its event date belong to the memory kept instead, which shows them.
    """
    tags = []
    for event, other in links:
        label, css = _LINK_TAGS[event]
        tags.append(
            f'<span class="{css}">{e(label)} <a href="{href("memory", id=other)}" '
            f'title="{e(other)}">{e(other[:8])}</a></span>'
        )
    if record.metadata.get(DUPLICATE_OF):
        return "".join(tags)
    dated = (("valid until", record.metadata.get(VALID_UNTIL)), ("event date", event_date))
    for label, value in dated:
        if value:
            tags.append(f'<span class="tag">{label} {e(short_date(str(value)))}</span>')
    return "".join(tags)


def event_dates(records: Sequence[MemoryRecord]) -> dict[str, str]:
    """Each memory's event date: its own, else one of its repeats' (the wording
    that carried the date may be the one merged away)."""
    by_id = {r.id: r for r in records}
    found = {}
    for record in records:
        own = record.metadata.get(EVENT_DATE)
        repeats = (by_id.get(i) for i in ids_of(record.metadata.get(DUPLICATES)))
        dated = [str(r.metadata[EVENT_DATE]) for r in repeats if r and r.metadata.get(EVENT_DATE)]
        if own or dated:
            found[record.id] = str(own) if own else dated[0]
    return found


def agent_label(agent_id: str | None, names: Mapping[str, str] | None = None) -> str:
    """An agent id as a person reads it: the agent's name when ``names`` knows
    it, else a name-like id in full and a machine id (32 hex digits or a UUID,
    as agentscope.app gives) shortened; the id itself on hover."""
    if not agent_id:
        return "-"
    if names and names.get(agent_id):
        return f'<span class="agent" title="{e(agent_id)}">{e(names[agent_id])}</span>'
    compact = agent_id.replace("-", "")
    if len(compact) == 32 and all(c in "0123456789abcdefABCDEF" for c in compact):
        return f'<span class="id" title="{e(agent_id)}">{e(agent_id[:8])}</span>'
    return e(agent_id)


def _dates(created: str | None, updated: str | None) -> str:
    """Created, and Updated only when it differs."""
    shown = e(short_date(created))
    if updated and short_date(updated) != short_date(created):
        shown += f"<br><small>updated {e(short_date(updated))}</small>"
    return shown


def _memory_cells(
    r: MemoryRecord,
    when: str,
    dates: str,
    user: str,
    csrf: str,
    names: Mapping[str, str] | None = None,
) -> str:
    """A memory's agent, date, timeline link and Forget button, as table cells."""
    return (
        f'<td data-label="agent">{agent_label(r.agent_id, names)}</td>'
        f'<td class="when" data-label="{when}">{dates}</td>'
        f'<td data-label="id"><a href="{href("memory", id=r.id)}">{short_id(r.id)}</a></td>'
        f"<td>{_forget_button(r.id, user, csrf)}</td></tr>"
    )


def _forget_button(memory_id: str, user: str, csrf: str) -> str:
    return (
        '<form class="inline" method="post" action="forget">'
        f'{_csrf(csrf)}<input type="hidden" name="memory_id" value="{e(memory_id)}">'
        f'<input type="hidden" name="user" value="{e(user)}">'
        '<button type="submit" class="forget">Forget</button></form>'
    )


def memories_table(
    records: Sequence[MemoryRecord],
    links: dict[str, list[tuple[str, str]]],
    user: str,
    csrf: str,
    dates: dict[str, str] | None = None,
    names: Mapping[str, str] | None = None,
) -> str:
    """One user's memories, each with its links, its timeline link and a Forget button.

    Args:
        dates: Event dates by memory id (see :func:`event_dates`).
        names: Agents' names by agent id, where known.
    """
    if not records:
        return "<p>No memories.</p>"
    dates = dates or {}
    rows = (
        f'<tr id="m-{e(r.id)}" class="memory{" superseded" if r.hidden else ""}">'
        f'<td class="text">{e(r.text)}'
        f"<div>{_relations(r, links.get(r.id, []), dates.get(r.id))}</div></td>"
        + _memory_cells(r, "created", _dates(r.created_at, r.updated_at), user, csrf, names)
        for r in records
    )
    return _table("memories", ["Memory", "Agent", "Created", "Id", ""], rows)


@dataclass(frozen=True)
class DatedMemory:
    """A memory as an as-of listing shows it, with the dates that decide it."""

    record: MemoryRecord
    said: str | None
    """When it was said (ISO 8601)."""
    happened: str | None
    """Its event date (``YYYY``, ``YYYY-MM`` or ``YYYY-MM-DD``), if it has one."""
    valid_until: str | None
    """Since when it no longer holds, when a newer memory superseded it."""


def as_of_listing(
    memories: Sequence[DatedMemory],
    when: str,
    links: dict[str, list[tuple[str, str]]],
    user: str,
    csrf: str,
    names: Mapping[str, str] | None = None,
) -> str:
    """The memories that were current at a moment (``when`` says it), superseded
    ones included where they still held then, each with when it was said,
    happened and held."""
    heading = (
        f'<h2 id="as-of">Current as of {e(when)}, newest first</h2>'
        "<p>Memories said (or true, by their event date) by then and not yet superseded; "
        "a memory superseded later is listed with the date it stopped holding.</p>"
    )
    if not memories:
        return heading + '<p id="none-then">No memory was current then.</p>'
    rows = []
    for m in memories:
        r = m.record
        later = [
            f'<span class="tag old">superseded by <a href="{href("memory", id=other)}" '
            f'title="{e(other)}">{e(other[:8])}</a></span>'
            for event, other in links.get(r.id, [])
            if event == "SUPERSEDED_BY"
        ]
        until = e(m.valid_until) if m.valid_until else "still current"
        # Not struck through: then, it was current.
        rows.append(
            f'<tr id="then-{e(r.id)}" class="memory">'
            f'<td class="text">{e(r.text)}<div>{"".join(later)}</div></td>'
            f'<td class="when" data-label="said">{e(short_date(m.said))}</td>'
            f'<td class="when" data-label="happened">{e(m.happened)}</td>'
            f'<td class="when" data-label="valid until">{until}</td>'
            f'<td data-label="agent">{agent_label(r.agent_id, names)}</td>'
            f'<td data-label="id"><a href="{href("memory", id=r.id)}">{short_id(r.id)}</a></td>'
            f"<td>{_forget_button(r.id, user, csrf)}</td></tr>"
        )
    heads = ["Memory", "Said", "Happened", "Valid until", "Agent", "Id", ""]
    return heading + _table("memories-then", heads, rows)


def forget_user_form(user: str, count: int, csrf: str) -> str:
    """The button that asks to forget all of a user's memories."""
    return (
        '<form method="post" action="forget-user">'
        f'{_csrf(csrf)}<input type="hidden" name="user" value="{e(user)}">'
        f'<button type="submit" class="danger" id="forget-all">Forget all {count} memories '
        f"of {e(user)}</button></form>"
    )


def confirm(question: str, action: str, fields: dict[str, str], csrf: str, back: str) -> str:
    """A confirmation step: the question, a Yes button posting ``fields`` again, Cancel."""
    hidden = "".join(
        f'<input type="hidden" name="{e(k)}" value="{e(v)}">' for k, v in fields.items()
    )
    return (
        f'<p id="question">{e(question)}</p>'
        f'<form method="post" action="{e(action)}" class="inline">{_csrf(csrf)}{hidden}'
        '<input type="hidden" name="confirm" value="yes">'
        '<button type="submit" class="danger" id="confirm">Yes, forget</button></form> '
        f'<a href="{back}" id="cancel">Cancel</a>'
    )


def hits_table(hits: Sequence[tuple[MemoryRecord, float | None]], user: str, csrf: str) -> str:
    """Search results, best first, with scores, agents and a Forget button each."""
    if not hits:
        return '<p id="no-hits">No memory matches.</p>'
    rows = (
        f'<tr class="hit"><td class="score num">{"-" if score is None else f"{score:.3f}"}</td>'
        f'<td class="text">{e(r.text)}</td>'
        + _memory_cells(r, "date", e(short_date(r.date)), user, csrf)
        for r, score in hits
    )
    return _table("hits", ["Score", "Memory", "Agent", "Date", "Id", ""], rows)


def memory_page(
    memory_id: str,
    record: MemoryRecord | None,
    entries: Sequence[dict[str, Any]],
    csrf: str,
    names: Mapping[str, str] | None = None,
) -> str:
    """One memory and its timeline (what ``agentscope-mem0 history`` shows)."""
    if record is None:
        head = f"<p>Memory <code>{e(memory_id)}</code> is gone; its history remains.</p>"
    else:
        user = record.user_id or ""
        head = (
            f'<p class="text" id="memory-text">{e(record.text)}</p>'
            f'<p class="bar">user <a href="{href("./", user=user)}">{e(user)}</a> · agent '
            f"{agent_label(record.agent_id, names)} · created "
            f"{_dates(record.created_at, record.updated_at)} · "
            f"<code>{e(memory_id)}</code> {_forget_button(memory_id, user, csrf)}</p>"
        )
    rows = (
        f'<tr><td class="when">{e(short_date(x.get("updated_at") or x.get("created_at")))}</td>'
        f'<td data-label="event"><span class="tag">{e(x.get("event"))}</span></td>'
        f'<td class="text" data-label="before">{e(x.get("old_memory"))}</td>'
        f'<td class="text" data-label="after">{e(x.get("new_memory"))}</td>'
        f'<td class="text" data-label="why">{e(x.get("reason") or "")}</td></tr>'
        for x in entries
    )
    table = _table("timeline", ["When", "Event", "Before", "After", "Why"], rows)
    return head + "<h2>Timeline</h2>" + (table if entries else "<p>mem0 kept no history of it.</p>")


def profile_section(record: Any, user: str, csrf: str) -> str:
    """A user's profile on their page, with the form that edits it and the
    button that clears it (what ``agentscope-mem0 profile --edit`` / ``--clear`` do)."""
    if record is None:
        shown = (
            '<p id="no-profile">No profile yet: it is distilled after new memories when the '
            "middleware runs with <code>Parameters(profile=True)</code>, or written here.</p>"
        )
        content, clear = "", ""
    else:
        shown = (
            f'<p class="bar">as of {e(short_date(record.updated_at))} · version '
            f'{e(record.version)}</p><pre class="working" id="profile">{e(record.content)}</pre>'
        )
        content = record.content
        clear = (
            '<form method="post" action="profile-clear" class="inline">'
            f'{_csrf(csrf)}<input type="hidden" name="user" value="{e(user)}">'
            '<button type="submit" class="danger" id="profile-clear">Clear the profile</button>'
            "</form>"
        )
    edit = (
        '<details id="profile-edit"><summary>Edit the profile</summary>'
        '<form method="post" action="profile-save" id="profile-form">'
        f'{_csrf(csrf)}<input type="hidden" name="user" value="{e(user)}">'
        f'<textarea name="text" id="profile-text" rows="6" maxlength="{PROFILE_MAX_CHARS}" '
        f'required aria-label="profile, one fact a line">{e(content)}</textarea>'
        '<div class="bar"><button type="submit" id="profile-save">Save the profile</button> '
        "<small>One fact a line; it stays until the next refresh distils it again.</small>"
        "</div></form></details>"
    )
    return f"<h2>Profile</h2>{shown}{edit}{clear}"


def working_page(
    user: str, conversation: str | None, record: Any, conversations: Sequence[str], where: str
) -> str:
    """A user's (or one conversation's) working memory, and the other conversations'."""
    if record is None:
        body = '<p id="no-working">No working memory here.</p>'
    else:
        body = (
            f'<p class="bar">format {e(record.kind)} · version {e(record.version)} · updated '
            f"{e(short_date(record.updated_at))}</p>"
            f'<pre class="working" id="working">{e(record.content) or "(empty)"}</pre>'
        )
    links = " ".join(
        f"<b>{e(c)}</b>"
        if c == conversation
        else f'<a href="{href("working", user=user, conversation=c)}">{e(c)}</a>'
        for c in conversations
    )
    own = "the user's own" if conversation else "<b>the user's own</b>"
    if conversation:
        own = f'<a href="{href("working", user=user)}">the user\'s own</a>'
    return (
        f'<p class="bar"><a href="{href("./", user=user)}">memories of {e(user)}</a> · '
        f"store <code>{e(where)}</code></p>{body}"
        f'<p class="bar" id="conversations">Working memories: {own} {links}</p>'
    )


def _preview(messages: list[Any]) -> str:
    text = " / ".join(
        f"{m.get('role', '?')}: {m.get('content', '')}" for m in messages if isinstance(m, dict)
    )
    return text if len(text) <= 300 else text[:299] + "…"


def _writes_table(rows: Sequence[WriteRow], table_id: str) -> str:
    if not rows:
        return f'<p id="{table_id}-none">None.</p>'
    cells = (
        f"<tr><td>#{w.id}</td><td>{e(w.user_id)}</td><td>{e(w.agent_id)}</td>"
        f"<td>{e(short_date(w.queued_at))}</td><td>{w.attempts}</td>"
        f'<td class="text">{e(_preview(w.messages))}</td><td class="text">{e(w.error)}</td></tr>'
        for w in rows
    )
    heads = ["Row", "User", "Agent", "Queued", "Attempts", "Exchange", "Error"]
    return _table(table_id, heads, cells, cards=False)


def outbox_body(path: Path | PostgresPlace, rows: list[WriteRow] | None, csrf: str) -> str:
    """The outbox page: pending and failed writes and the retry button."""
    if rows is None:
        return f"<p>No outbox yet at <code>{e(path)}</code>: nothing was queued.</p>"
    pending = [w for w in rows if w.status != "failed"]
    failed = [w for w in rows if w.status == "failed"]
    retry = ""
    if failed:
        retry = (
            '<form method="post" action="outbox-retry">'
            f'{_csrf(csrf)}<button type="submit" id="retry">Retry {len(failed)} failed '
            "writes</button> <small>They become pending; the next writer on this outbox "
            "(the application, when it runs) sends them.</small></form>"
        )
    return (
        f"<p>File <code>{e(path)}</code></p>"
        f"<h2>Pending ({len(pending)})</h2>{_writes_table(pending, 'pending')}"
        f"<h2>Failed ({len(failed)})</h2>{_writes_table(failed, 'failed')}{retry}"
    )
