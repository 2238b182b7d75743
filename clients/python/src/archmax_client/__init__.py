"""A client for archmax serve's HTTP API.

`Client` (sync) and `AsyncClient` (async) start sessions, continue them, decide and
deliver (with files for `type: file` inputs), read sessions, transcripts and the workflow
catalog, page through sessions, and stream a session's events with automatic
`Last-Event-ID` resume. Error answers are raised as `ArchmaxError` subclasses.
"""

from ._client import AsyncClient, AsyncEventStream, Client, EventStream, FileInput, Retry
from ._sse import Event
from .errors import (
    ArchmaxConnectionError,
    ArchmaxError,
    AuthError,
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
    RateLimitedError,
    ServerError,
    UnauthorizedError,
)

__version__ = "0.1.0"

__all__ = [
    "ArchmaxConnectionError",
    "ArchmaxError",
    "AsyncClient",
    "AsyncEventStream",
    "AuthError",
    "Client",
    "ConflictError",
    "Event",
    "EventStream",
    "FileInput",
    "ForbiddenError",
    "InvalidInputError",
    "NotFoundError",
    "PayloadTooLargeError",
    "RateLimitedError",
    "Retry",
    "ServerError",
    "UnauthorizedError",
    "__version__",
]
