"""Typed errors from the API's error answers (`{"error": {"code", "message", "details"}}`)."""

from __future__ import annotations

from typing import Any, Mapping

import httpx

__all__ = [
    "ArchmaxError",
    "InvalidInputError",
    "AuthError",
    "UnauthorizedError",
    "ForbiddenError",
    "NotFoundError",
    "ConflictError",
    "PayloadTooLargeError",
    "RateLimitedError",
    "ServerError",
    "ArchmaxConnectionError",
    "error_from_response",
]


class ArchmaxError(Exception):
    """An error answer from `archmax serve`.

    `status` is the HTTP status, `code` the API's stable id (such as `session.busy` or
    `input.invalid`), `message` the sentence a person reads, `details` the rest (a 400 lists
    every offending field in `details["fields"]`).
    """

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        details: Mapping[str, Any] | None = None,
        *,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})
        self.retry_after = retry_after

    @property
    def fields(self) -> list[dict[str, str]]:
        """The offending fields of a 400 (`details.fields`), or an empty list."""
        fields = self.details.get("fields")
        return list(fields) if isinstance(fields, list) else []


class InvalidInputError(ArchmaxError):
    """400: a field, a query parameter or the body does not hold."""


class AuthError(ArchmaxError):
    """401 or 403: no valid token, or the token lacks the scope."""


class UnauthorizedError(AuthError):
    """401: no valid bearer token (or a bad webhook signature)."""


class ForbiddenError(AuthError):
    """403: the token lacks the scope, or the request is refused (a decider who is not an approver)."""


class NotFoundError(ArchmaxError):
    """404: no such session, workflow or trigger."""


class ConflictError(ArchmaxError):
    """409: the session is busy with a turn, exists already, or is not parked where the request needs it."""


class PayloadTooLargeError(ArchmaxError):
    """413: the body, or an upload, is over the server's limit."""


class RateLimitedError(ArchmaxError):
    """429: the server is saturated; `retry_after` holds its Retry-After in seconds, when given."""


class ServerError(ArchmaxError):
    """5xx: the store failed, a turn ended without an answer, or the server is shutting down (503)."""


class ArchmaxConnectionError(ArchmaxError):
    """No answer at all: the connection failed or an event stream ran out of retries (status 0)."""

    def __init__(self, message: str, *, cause: BaseException | None = None) -> None:
        super().__init__(0, "connection", message, {})
        self.__cause__ = cause


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        return None


def error_from_response(response: httpx.Response) -> ArchmaxError:
    """The typed error for a non-2xx answer (its body read already)."""
    status = response.status_code
    code, message = f"http.{status}", response.reason_phrase or f"HTTP {status}"
    details: dict[str, Any] = {}
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        error = body["error"]
        code = str(error.get("code", code))
        message = str(error.get("message", message))
        details = error.get("details") if isinstance(error.get("details"), dict) else {}
    cls: type[ArchmaxError]
    if status == 400:
        cls = InvalidInputError
    elif status == 401:
        cls = UnauthorizedError
    elif status == 403:
        cls = ForbiddenError
    elif status == 404:
        cls = NotFoundError
    elif status == 409:
        cls = ConflictError
    elif status == 413:
        cls = PayloadTooLargeError
    elif status == 429:
        cls = RateLimitedError
    elif status >= 500:
        cls = ServerError
    else:
        cls = ArchmaxError
    return cls(status, code, message, details, retry_after=_retry_after(response))
