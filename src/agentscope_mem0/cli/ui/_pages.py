"""The inspector's HTML: plain server-rendered pages, no script, no outside assets.

Every value that comes from the store or the request goes through :func:`e`
(HTML escaping, quotes included) or :func:`href` (URL encoding, then
escaping); nothing else is interpolated into markup.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from datetime import date
from typing import Any
from urllib.parse import urlencode

from ..._mem0.hits import MemoryHit
from .._output import short_date
from ._inspector import MemoryView, OutboxView, UserSummary, WriteView

__all__ = ["CSS", "e", "href", "page"]

CSS = """
body{font:15px/1.45 system-ui,sans-serif;margin:0;color:#1d232a;background:#f6f7f9}
header{background:#243447;color:#fff;padding:.6em 1.2em;display:flex;gap:1.4em;align-items:baseline}
header a{color:#cfe3ff;text-decoration:none}header b{font-size:1.1em}
main{padding:1em 1.4em;max-width:70em}
table{border-collapse:collapse;width:100%;background:#fff;margin:.6em 0 1.2em}
th,td{border-bottom:1px solid #e3e6ea;padding:.35em .55em;text-align:left;vertical-align:top}
th{background:#eef1f4;font-weight:600}
td.text{white-space:pre-wrap;word-break:break-word;max-width:40em}
code,.id{font:12px ui-monospace,monospace;color:#56606b}
tr.superseded td.text{text-decoration:line-through;color:#7a828a}
.tag{display:inline-block;font-size:12px;border-radius:3px;padding:0 .35em;
  margin:.1em .2em .1em 0;background:#e8eef7}
.tag.old{background:#f6e3e3}.tag.new{background:#e2f2e5}
form.inline{display:inline}
button{font:inherit;padding:.15em .7em;cursor:pointer}
button.danger{background:#b3261e;color:#fff;border:1px solid #8c1d17;border-radius:3px}
.flash{background:#e2f2e5;border:1px solid #9ccfa6;padding:.5em .8em;margin:.5em 0}
.error{background:#fbe9e7;border:1px solid #e0a39b;padding:.5em .8em;margin:.5em 0}
.counters{display:flex;flex-wrap:wrap;gap:.6em;margin:.6em 0}
.counters div{background:#fff;border:1px solid #e3e6ea;padding:.4em .8em;min-width:7em}
.counters b{display:block;font-size:1.3em}
input[type=text],input[type=search]{font:inherit;padding:.2em .4em;min-width:18em}
input[type=number]{width:4em}
svg{background:#fff;border:1px solid #e3e6ea}
"""

# Time-judgement fields that carry a date.
_DATES = ("valid_until", "event_date")


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
        f'<title>{e(title)} · agentscope-mem0</title><link rel="stylesheet" href="/style.css">'
        "</head><body><header><b>agentscope-mem0</b>"
        f'<a href="/">Users</a><a href="/outbox">Outbox</a><span>{e(where)}</span></header>'
        f"<main><h1>{e(title)}</h1>{notes}{body}</main></body></html>"
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


def users_table(users: Sequence[UserSummary]) -> str:
    """The users page's table."""
    if not users:
        return "<p>No memories stored yet.</p>"
    rows = "".join(
        f'<tr><td><a class="user" href="{href("/", user=u.user_id)}">{e(u.user_id)}</a></td>'
        f"<td>{u.memories}</td><td>{e(', '.join(u.agents) or '-')}</td>"
        f"<td>{e(short_date(u.last_write))}</td></tr>"
        for u in users
    )
    return (
        '<table id="users"><thead><tr><th>User</th><th>Memories</th><th>Agents</th>'
        f"<th>Last write</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def search_form(user: str, query: str = "", agent: str | None = None, top_k: int = 10) -> str:
    """The search box of a user page."""
    return (
        '<form method="get" action="/search" id="search-form">'
        f'<input type="hidden" name="user" value="{e(user)}">'
        + (f'<input type="hidden" name="agent" value="{e(agent)}">' if agent else "")
        + f'<input type="search" name="q" value="{e(query)}" placeholder="search memories" '
        f'aria-label="query" required> <label>top <input type="number" name="k" min="1" '
        f'max="100" value="{top_k}"></label> '
        '<button type="submit">Search</button></form>'
    )


def _link(label: str, memory_id: str, css: str = "tag") -> str:
    return (
        f'<span class="{css}">{e(label)} <a href="#m-{e(memory_id)}">{e(memory_id[:8])}</a></span>'
    )


def _relations(view: MemoryView) -> str:
    tags = []
    if view.superseded_by:
        tags.append(_link("superseded by", view.superseded_by, "tag old"))
    tags += [_link("supersedes", old, "tag new") for old in view.supersedes]
    if view.extends:
        tags.append(_link("extends", view.extends))
    tags += [_link("extended by", newer) for newer in view.extended_by]
    for key in _DATES:
        value = getattr(view, key)
        if value:
            tags.append(
                f'<span class="tag">{e(key.replace("_", " "))} {e(short_date(value))}</span>'
            )
    return "".join(tags)


def memories_table(views: Sequence[MemoryView], user: str, csrf: str) -> str:
    """One user's memories, newest first, each with a Forget button."""
    if not views:
        return "<p>No memories.</p>"
    rows = []
    for v in views:
        r = v.record
        rows.append(
            f'<tr id="m-{e(r.id)}" class="memory{"" if v.current else " superseded"}">'
            f'<td class="text">{e(r.text)}<div>{_relations(v)}</div></td>'
            f"<td>{e(r.agent_id)}</td><td>{e(short_date(r.created_at))}</td>"
            f"<td>{e(short_date(r.updated_at))}</td>"
            f'<td><span class="id">{e(r.id)}</span></td><td>'
            '<form class="inline" method="post" action="/forget">'
            f'{_csrf(csrf)}<input type="hidden" name="memory_id" value="{e(r.id)}">'
            f'<input type="hidden" name="user" value="{e(user)}">'
            '<button type="submit" class="forget">Forget</button></form></td></tr>'
        )
    return (
        '<table id="memories"><thead><tr><th>Memory</th><th>Agent</th><th>Created</th>'
        "<th>Updated</th><th>Id</th><th></th></tr></thead>"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def forget_user_form(user: str, count: int, csrf: str) -> str:
    """The button that asks to forget all of a user's memories."""
    return (
        '<form method="post" action="/forget-user">'
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


def hits_table(hits: Sequence[MemoryHit]) -> str:
    """Search results, best first, with scores."""
    if not hits:
        return '<p id="no-hits">No memory matches.</p>'
    rows = "".join(
        f'<tr class="hit"><td class="score">{"-" if h.score is None else f"{h.score:.3f}"}</td>'
        f'<td class="text">{e(h.memory)}</td><td>{e(short_date(h.date))}</td>'
        f'<td><span class="id">{e(h.id)}</span></td></tr>'
        for h in hits
    )
    return (
        '<table id="hits"><thead><tr><th>Score</th><th>Memory</th><th>Date</th><th>Id</th>'
        f"</tr></thead><tbody>{rows}</tbody></table>"
    )


def _writes_table(rows: Sequence[WriteView], table_id: str) -> str:
    if not rows:
        return f'<p id="{table_id}-none">None.</p>'
    body = "".join(
        f"<tr><td>#{w.id}</td><td>{e(w.user_id)}</td><td>{e(w.agent_id)}</td>"
        f"<td>{e(short_date(w.queued_at))}</td><td>{w.attempts}</td>"
        f'<td class="text">{e(w.preview)}</td><td class="text">{e(w.error)}</td></tr>'
        for w in rows
    )
    return (
        f'<table id="{table_id}"><thead><tr><th>Row</th><th>User</th><th>Agent</th>'
        "<th>Queued</th><th>Attempts</th><th>Exchange</th><th>Error</th></tr></thead>"
        f"<tbody>{body}</tbody></table>"
    )


def outbox_body(view: OutboxView, csrf: str) -> str:
    """The outbox page: pending and failed writes and the retry button."""
    if not view.exists:
        return f"<p>No outbox yet at <code>{e(view.path)}</code>: nothing was queued.</p>"
    retry = ""
    if view.failed:
        retry = (
            '<form method="post" action="/outbox/retry">'
            f'{_csrf(csrf)}<button type="submit" id="retry">Retry {len(view.failed)} failed '
            "writes</button> <small>They become pending; the next writer on this outbox "
            "(the application, when it runs) sends them.</small></form>"
        )
    return (
        f"<p>File <code>{e(view.path)}</code></p>"
        f"<h2>Pending ({len(view.pending)})</h2>{_writes_table(view.pending, 'pending')}"
        f"<h2>Failed ({len(view.failed)})</h2>{_writes_table(view.failed, 'failed')}{retry}"
    )
