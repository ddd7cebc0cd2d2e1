"""vLLM's error body (``ErrorResponse``), shared by the fake vLLM's endpoints.

vLLM answers every refusal with one JSON shape: ``object: "error"``, the
message, a ``type`` named for the status (``BadRequestError`` for 400,
``NotFoundError`` for 404, ...), the offending ``param`` and the ``code``.
"""

from __future__ import annotations

from aiohttp import web

__all__ = ["error_response"]


def error_response(message: str, *, status: int, param: str | None = None) -> web.Response:
    """vLLM's error body (``ErrorResponse``)."""
    kind = {
        400: "BadRequestError",
        404: "NotFoundError",
        409: "ConflictError",
        503: "ServiceUnavailableError",
    }.get(status, "InternalServerError")
    body = {"object": "error", "message": message, "type": kind, "param": param, "code": status}
    return web.json_response(body, status=status)
