"""A fake web site for the direct fetcher: pages, redirects and odd content by host and path."""

from __future__ import annotations

from collections.abc import Mapping

from tests.support.fakes.server import FakeServer, Request, Response


class SiteFake(FakeServer):
    """Serves ``routes[(host, path)]`` or ``routes[path]``; 404 otherwise."""

    name = "site"

    def __init__(self, routes: Mapping[str | tuple[str, str], Response], **kwargs: object):
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.routes = dict(routes)

    def route(self, request: Request) -> Response:
        host = request.headers.get("host", "").split(":")[0]
        found = self.routes.get((host, request.path)) or self.routes.get(request.path)
        return found or Response(404, "<html><body>Not Found</body></html>", content_type="text/html")

    @staticmethod
    def redirect(location: str, status: int = 302) -> Response:
        """A redirect to ``location``."""
        return Response(status, b"", {"Location": location}, content_type="text/html")
