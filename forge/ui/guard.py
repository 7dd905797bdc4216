"""The checks every request of `forge ui` passes, pages and JSON API alike, made once.

`Guard` says who may be served (the `Host` is this server's, the token comes with the
request) and whether a change may be made (it comes from this page, with the session's CSRF
token); `Guarded`, the app's outermost layer, applies the first to every request before
any route sees it — a refusal is the app's error page, or JSON under `/api/` — and gives
each page it serves the session cookie and the headers that keep it out of other sites'
frames. A page's change is checked by its route against the form it posted (`posted`); an
API change made with the session cookie (a browser's) is checked here, by its
`X-CSRF-Token` header; a program's (`Authorization: Bearer TOKEN`) needs no more.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

__all__ = ["API_PATHS", "COOKIE", "Guard", "Guarded", "Refusal"]

COOKIE = "forge_ui"
API_PATHS = "/api/"
"""Where the JSON API's routes are: a request under it is refused in JSON."""

_FRAMED_NOWHERE = ((b"x-frame-options", b"DENY"),
                   (b"content-security-policy",
                    b"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
                    b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'"))


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request not served: its HTTP status and why, in words."""

    status: int
    message: str


class Guard:
    """The token, the hosts this server answers to, and the session's CSRF key."""

    def __init__(self, token: str, hosts: Iterable[str]) -> None:
        self.token, self.hosts = token, frozenset(h.lower() for h in hosts)
        self._key = hashlib.sha256(f"forge-ui-csrf:{token}".encode()).digest()

    def csrf(self, request: Request) -> str:
        """The session's CSRF token: a keyed hash of its session cookie (or of the token
        itself, on the first visit, which sets the cookie)."""
        session = request.cookies.get(COOKIE) or self.token
        return hmac.new(self._key, session.encode(), hashlib.sha256).hexdigest()

    def who(self, request: Request, *, api: bool) -> Refusal | None:
        """Refuse a request for another host, or without this server's token: a page's as
        `?token=` or the session cookie, the API's also as `Authorization: Bearer`. An API
        change (anything but GET) made with the session cookie must come from this page,
        with the `X-CSRF-Token` header."""
        host = request.headers.get("host", "").lower()
        if host not in self.hosts:
            return Refusal(400, f"this forge ui does not serve the host {host!r}")
        if not api:
            given = request.query_params.get("token") or request.cookies.get(COOKIE) or ""
            if not hmac.compare_digest(given.encode(), self.token.encode()):
                return Refusal(403, "forbidden: open the URL forge ui printed (it carries the token)")
            return None
        bearer = _bearer(request)
        given = bearer if bearer is not None else (request.query_params.get("token") or
                                                    request.cookies.get(COOKIE) or "")
        if not given:
            return Refusal(401, "no token: send Authorization: Bearer TOKEN (the token forge ui printed)")
        if not hmac.compare_digest(given.encode(), self.token.encode()):
            return Refusal(403, "forbidden: the token is not this forge ui's")
        if request.method != "GET" and bearer is None:  # a browser's session: the page's own rules
            if not self._from_here(request):
                return Refusal(403, "forbidden: a change made with the session cookie must come from this page "
                                    "(Origin); a program sends Authorization: Bearer TOKEN instead")
            if not hmac.compare_digest(request.headers.get("x-csrf-token", "").encode(), self.csrf(request).encode()):
                return Refusal(403, "forbidden: the X-CSRF-Token header is missing or wrong")
        return None

    def forged(self, request: Request, form: Any) -> Refusal | None:
        """Refuse a page's change that does not come from this page (`Origin`, or `Referer`)
        with the session's CSRF token in its form."""
        if not self._from_here(request):
            return Refusal(403, "forbidden: a state-changing request must come from this page (Origin)")
        if not hmac.compare_digest(str(form.get("csrf", "")).encode(), self.csrf(request).encode()):
            return Refusal(403, "forbidden: the form's CSRF token is missing or wrong; reload the page and try again")
        return None

    async def posted(self, request: Request) -> tuple[Refusal | None, Any]:
        """A page's change: its form, and the refusal to make it, if any (`forged`)."""
        form = await request.form()
        return self.forged(request, form), form

    def _from_here(self, request: Request) -> bool:
        origin = request.headers.get("origin") or request.headers.get("referer") or ""
        return urlsplit(origin).netloc.lower() in self.hosts


def _bearer(request: Request) -> str | None:
    given = request.headers.get("authorization", "")
    scheme, _, value = given.partition(" ")
    return value.strip() if scheme.lower() == "bearer" else None


Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class Guarded:
    """An ASGI app behind a `Guard`: every HTTP request is checked (`Guard.who`) before the
    app sees it, a refusal answered by `refuse(refusal, api)`; a page served (anything
    outside `API_PATHS`) gets the session cookie and may not be framed."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]], guard: Guard,
                 refuse: Callable[[Refusal, bool], Response]) -> None:
        self.app, self.guard, self.refuse = app, guard, refuse
        cookie = Response()
        cookie.set_cookie(COOKIE, guard.token, httponly=True, samesite="strict")
        self._page_headers = ((b"set-cookie", cookie.headers["set-cookie"].encode("latin-1")), *_FRAMED_NOWHERE)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        api = str(scope["path"]).startswith(API_PATHS)
        refusal = self.guard.who(Request(scope), api=api)
        if refusal is not None:
            await self.refuse(refusal, api)(scope, receive, send)
            return
        if api:
            await self.app(scope, receive, send)
            return

        async def page(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), *self._page_headers]
            await send(message)

        await self.app(scope, receive, page)
