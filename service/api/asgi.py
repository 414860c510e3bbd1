"""What the request middlewares (:mod:`service.api.logs`, :mod:`service.api.metrics`) read off
an ASGI request: the response status and the route template."""

from __future__ import annotations

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


def route_template(scope: Scope) -> str:
    """The path template of the route that handled the request (``other`` when none matched)."""
    return str(getattr(scope.get("route"), "path", "other"))
