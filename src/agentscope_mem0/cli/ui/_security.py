"""Who may use the inspector, and which requests may change memories.

* Binding: loopback addresses only, unless an access token is given
  (:func:`check_bind`).
* Access token: when set, every request carries it, as
  ``Authorization: Bearer <token>`` or as the cookie set when the printed URL
  (``/?token=<token>``) is opened; anything else gets 401.
* Without a token, only this machine: the peer (the ASGI ``client``) must be
  a loopback address, and no proxy header may name another client, whatever
  ``Host`` says (403) -- a proxy on this machine forwards every client from
  127.0.0.1, so an inspector behind one needs a token. The ``Host`` header
  must name a loopback host too (421), so a rebinding DNS name cannot reach
  the page.
* Write actions are POSTs that carry the process's secret in a hidden form
  field *and* in a ``SameSite=Strict`` cookie, with a same-origin ``Origin``
  (and ``Sec-Fetch-Site``) when the browser sends one; anything else gets 403.
* Every response forbids scripts, framing and caching (a strict CSP), so even
  a memory that slipped through escaping could not run.
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

__all__ = ["TOKEN_ENV", "Guard", "check_bind", "is_loopback"]

TOKEN_ENV = "AGENTSCOPE_MEM0_UI_TOKEN"
"""Environment variable holding the inspector's access token."""

_MIN_TOKEN = 16

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

HEADERS = (
    (
        b"content-security-policy",
        b"default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
        b"frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # "no-referrer" makes Origin "null"
    (b"cache-control", b"no-store"),
)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or address) is this machine's loopback."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse a binding that would expose memories without a token.

    Raises:
        ValueError: ``host`` is not loopback and there is no token, or the
            token is too short to be a secret.
    """
    if token is not None and len(token) < _MIN_TOKEN:
        raise ValueError(
            f"the access token must be at least {_MIN_TOKEN} characters; make one with "
            "`python -c 'import secrets; print(secrets.token_urlsafe(24))'`"
        )
    if not is_loopback(host) and not token:
        raise ValueError(
            f"refusing to serve memories on {host!r} without an access token: anyone who "
            f"can reach that address could read them. Give --token (or ${TOKEN_ENV}), or "
            "bind to 127.0.0.1"
        )


def _headers(scope: Scope) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}


def _cookies(headers: dict[str, str]) -> dict[str, str]:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # a malformed cookie header counts as none
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


def _same(a: str | None, b: str) -> bool:
    return a is not None and hmac.compare_digest(a.encode(), b.encode())


# Headers in which a proxy names the client it forwards.
_FORWARDED = ("forwarded", "x-forwarded-for", "x-real-ip")


def _forwarded_for(headers: dict[str, str]) -> list[str]:
    """The client addresses proxy headers name (``Forwarded: for=``,
    ``X-Forwarded-For``, ``X-Real-IP``)."""
    names = []
    for header in _FORWARDED:
        for part in headers.get(header, "").split(","):
            part = part.strip()
            if header == "forwarded":
                fields = dict(
                    (k.strip().lower(), v.strip().strip('"'))
                    for k, _, v in (f.partition("=") for f in part.split(";"))
                )
                part = fields.get("for", "")
            if part:
                names.append(part)
    return names


def _address(name: str) -> str:
    """``name`` without a port: ``[::1]:80`` -> ``::1``, ``1.2.3.4:80`` -> ``1.2.3.4``."""
    if name.startswith("["):
        return name[1:].split("]", 1)[0]
    return name.rsplit(":", 1)[0] if name.count(":") == 1 else name


class Guard:
    """The token, peer, host and CSRF checks, as ASGI middleware around the app.

    Args:
        app: The inspector's ASGI app.
        token: The access token every request must carry; ``None`` answers
            loopback peers naming a loopback host only.
    """

    def __init__(self, app: ASGIApp, *, token: str | None) -> None:
        self.app = app
        self.token = token
        self.csrf = secrets.token_urlsafe(32)
        """This process's secret, in every form and the CSRF cookie."""
        suffix = secrets.token_hex(4)
        # Cookies ignore ports: names of their own keep two inspectors apart.
        self.csrf_cookie = f"agentscope_mem0_csrf_{suffix}"
        self.token_cookie = f"agentscope_mem0_token_{suffix}"

    # -- checks -------------------------------------------------------------

    def _peer_ok(self, scope: Scope, headers: dict[str, str]) -> bool:
        if self.token is not None:
            return True
        # No client (a Unix socket) is a proxy's: the client is unknown.
        client = scope.get("client")
        if not client or not is_loopback(str(client[0])):
            return False
        return all(is_loopback(_address(name)) for name in _forwarded_for(headers))

    def _host_ok(self, headers: dict[str, str]) -> bool:
        if self.token is not None:
            return True
        return is_loopback(_address(headers.get("host", "")))

    def _token_ok(self, headers: dict[str, str], cookies: dict[str, str]) -> bool:
        if self.token is None:
            return True
        auth = headers.get("authorization", "")
        if auth.lower().startswith("bearer ") and _same(auth[7:].strip(), self.token):
            return True
        return _same(cookies.get(self.token_cookie), self.token)

    def csrf_problem(self, headers: dict[str, str], field: str | None) -> str | None:
        """Why a POST whose form carries ``field`` as its token is refused, or
        ``None`` when it may go on."""
        origin = headers.get("origin")
        host = headers.get("host", "")
        if origin is not None and origin not in (f"http://{host}", f"https://{host}"):
            return "the request came from another site (Origin does not match)"
        site = headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return f"the request came from another site (Sec-Fetch-Site: {site})"
        if not _same(field, self.csrf):
            return "the form's security token is missing or stale; reload the page and try again"
        if not _same(_cookies(headers).get(self.csrf_cookie), self.csrf):
            return "the security cookie is missing; reload the page and try again"
        return None

    # -- ASGI ---------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = _headers(scope)
        cookies = _cookies(headers)
        if not self._peer_ok(scope, headers):
            await _plain(
                send,
                403,
                "this inspector has no access token, so it answers requests from this "
                "machine only; to open it from elsewhere (or behind a proxy) give it a "
                f"token (token= or ${TOKEN_ENV})",
            )
            return
        if not self._host_ok(headers):
            await _plain(send, 421, "this inspector answers on 127.0.0.1 or localhost only")
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if self.token is not None and "token" in query and scope["method"] == "GET":
            if not _same(query["token"], self.token):
                await _plain(send, 401, "wrong access token")
                return
            rest = urlencode([(k, v) for k, v in query.items() if k != "token"])
            location = _local_path(scope["path"]) + (f"?{rest}" if rest else "")
            await _redirect(send, location, self._cookie(self.token_cookie, self.token))
            return
        if not self._token_ok(headers, cookies):
            await _plain(
                send,
                401,
                "this inspector needs its access token: open the URL it printed "
                "(with ?token=...) or send Authorization: Bearer <token>",
            )
            return
        cookie = self._cookie(self.csrf_cookie, self.csrf)

        async def send_with_headers(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [
                    *message.get("headers", []),
                    *HEADERS,
                    (b"set-cookie", cookie),
                ]
            await send(message)

        await self.app(scope, receive, send_with_headers)

    @staticmethod
    def _cookie(name: str, value: str) -> bytes:
        return f"{name}={value}; Path=/; HttpOnly; SameSite=Strict".encode("latin-1")


def _local_path(path: str) -> str:
    """``path`` as a path on this server: ``//evil.example/`` (or ``/\\evil``)
    in a Location header is another site to a browser."""
    return quote("/" + path.lstrip("/\\"), safe="/")


async def _plain(send: Send, status: int, text: str) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"text/plain; charset=utf-8"), *HEADERS],
        }
    )
    await send({"type": "http.response.body", "body": text.encode()})


async def _redirect(send: Send, location: str, cookie: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": 303,
            "headers": [
                (b"location", location.encode("latin-1")),
                (b"set-cookie", cookie),
                *HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": b""})
