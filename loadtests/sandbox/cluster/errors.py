"""API errors of the emulated cluster, shaped as the real API server's ``Status``.

Each error knows its HTTP code and ``reason`` and renders the ``Status``
object real clients parse (kubectl prints ``message``; client libraries map
``reason`` and ``code`` to exceptions)::

    ApiError
    ├── BadRequest        400 BadRequest
    ├── Unauthorized      401 Unauthorized
    ├── Forbidden         403 Forbidden
    ├── NotFound          404 NotFound
    ├── MethodNotAllowed  405 MethodNotAllowed
    ├── AlreadyExists     409 AlreadyExists
    ├── Conflict          409 Conflict
    ├── Gone              410 Expired
    ├── UnsupportedMediaType 415 UnsupportedMediaType
    ├── Invalid           422 Invalid (with field causes)
    ├── TooManyRequests   429 TooManyRequests
    └── ServiceUnavailable 503 ServiceUnavailable
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "AlreadyExists",
    "ApiError",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "MethodNotAllowed",
    "NotFound",
    "ServiceUnavailable",
    "TooManyRequests",
    "Unauthorized",
    "UnsupportedMediaType",
]


class ApiError(Exception):
    code: ClassVar[int] = 500
    reason: ClassVar[str] = "InternalError"

    def __init__(
        self,
        message: str,
        *,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _object_details(group: str, plural: str, name: str) -> dict[str, Any]:
    details: dict[str, Any] = {"name": name, "kind": plural}
    if group:
        details["group"] = group
    return details


class BadRequest(ApiError):
    code = 400
    reason = "BadRequest"


class Unauthorized(ApiError):
    code = 401
    reason = "Unauthorized"


class Forbidden(ApiError):
    code = 403
    reason = "Forbidden"


class NotFound(ApiError):
    code = 404
    reason = "NotFound"

    @classmethod
    def of(cls, group: str, plural: str, name: str) -> NotFound:
        resource = f"{plural}.{group}" if group else plural
        return cls(f'{resource} "{name}" not found', details=_object_details(group, plural, name))


class MethodNotAllowed(ApiError):
    code = 405
    reason = "MethodNotAllowed"


class AlreadyExists(ApiError):
    code = 409
    reason = "AlreadyExists"

    @classmethod
    def of(cls, group: str, plural: str, name: str) -> AlreadyExists:
        resource = f"{plural}.{group}" if group else plural
        return cls(
            f'{resource} "{name}" already exists', details=_object_details(group, plural, name)
        )


class Conflict(ApiError):
    code = 409
    reason = "Conflict"

    @classmethod
    def stale(cls, group: str, plural: str, name: str) -> Conflict:
        resource = f"{plural}.{group}" if group else plural
        return cls(
            f'Operation cannot be fulfilled on {resource} "{name}": the object has been '
            "modified; please apply your changes to the latest version and try again",
            details=_object_details(group, plural, name),
        )


class Gone(ApiError):
    code = 410
    reason = "Expired"


class Invalid(ApiError):
    code = 422
    reason = "Invalid"

    @classmethod
    def of(cls, *, kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> Invalid:
        """``causes``: (field path, message) pairs, as the real server lists them."""
        # One error reads "field: message"; several are bracketed, as Go's
        # field.ErrorList aggregate prints them.
        summary = ", ".join(f"{field}: {msg}" for field, msg in causes)
        if len(causes) > 1:
            summary = f"[{summary}]"
        details: dict[str, Any] = {
            "name": name,
            "kind": kind,
            "causes": [
                {"reason": _cause_reason(msg), "message": msg, "field": field}
                for field, msg in causes
            ],
        }
        if group:
            details["group"] = group
        subject = f"{kind}.{group}" if group else kind
        return cls(f'{subject} "{name}" is invalid: {summary}', details=details)


_CAUSE_REASONS = (
    ("Required value", "FieldValueRequired"),
    ("Unsupported value", "FieldValueNotSupported"),
    ("Duplicate value", "FieldValueDuplicate"),
    ("Forbidden", "FieldValueForbidden"),
    ("Too long", "FieldValueTooLong"),
)


def _cause_reason(message: str) -> str:
    """The ``StatusCause.reason`` for a field error message, by its standard prefix."""
    for prefix, reason in _CAUSE_REASONS:
        if message.startswith(prefix):
            return reason
    return "FieldValueInvalid"


class UnsupportedMediaType(ApiError):
    code = 415
    reason = "UnsupportedMediaType"


class TooManyRequests(ApiError):
    code = 429
    reason = "TooManyRequests"


class ServiceUnavailable(ApiError):
    code = 503
    reason = "ServiceUnavailable"
