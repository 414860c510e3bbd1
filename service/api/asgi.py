"""What the request middlewares (:mod:`service.api.logs`, :mod:`service.api.telemetry`) read off
an ASGI request: the response status and the route template."""

from __future__ import annotations

import re
from collections.abc import Iterable

from starlette.routing import BaseRoute
from starlette.types import Message, Scope, Send


class StatusSend:
    """An ASGI ``send`` that passes every message on and keeps the response status in
    ``status`` (500 until the response starts: the app failed before answering)."""

    def __init__(self, send: Send) -> None:
        self.send = send
        self.status = 500

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = int(message["status"])
        await self.send(message)


RoutePatterns = list[tuple[re.Pattern[str], str]]


def route_patterns(routes: Iterable[BaseRoute]) -> RoutePatterns:
    """Each route's path pattern and template (what :func:`route_template` matches a path
    against when no route handled the request)."""
    out: RoutePatterns = []
    for route in routes:
        pattern, template = getattr(route, "path_regex", None), getattr(route, "path", None)
        if pattern is not None and template is not None:
            out.append((pattern, str(template)))
    return out


def route_template(scope: Scope) -> str:
    """The path template of the route that handled the request, or of the route it was sent
    to when a middleware answered before routing (a 413, 415 or non-UTF-8 body: the app's
    ``state.route_templates``); ``other`` when the path is no route's."""
    route = scope.get("route")
    if route is not None:
        return str(getattr(route, "path", "other"))
    state = getattr(scope.get("app"), "state", None)
    path = str(scope.get("path", ""))
    patterns: RoutePatterns = getattr(state, "route_templates", [])
    for pattern, template in patterns:
        if pattern.match(path):
            return template
    return "other"
