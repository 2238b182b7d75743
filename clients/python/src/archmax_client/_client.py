"""The sync `Client` and the async `AsyncClient` over `archmax serve`'s HTTP API."""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, AsyncGenerator, AsyncIterator, Generator, Iterator, Mapping, Tuple, Union
from urllib.parse import quote

import httpx

from ._sse import Event, SseParser
from .errors import ArchmaxConnectionError, ArchmaxError, RateLimitedError, ServerError, error_from_response

#: A file for a `type: file` input: a path (its file name is sent), bytes or an open binary
#: file with a `(file name, content)` or `(file name, content, media type)` tuple. The
#: server checks the file name's ending against the input's `accept`.
FileInput = Union[
    str,
    "os.PathLike[str]",
    Tuple[str, Union[bytes, IO[bytes]]],
    Tuple[str, Union[bytes, IO[bytes]], str],
]

JSON = Any

DEFAULT_TIMEOUT = 30.0


@dataclass
class Retry:
    """How an event stream reconnects after a disconnect: up to `max_retries` attempts in a
    row (the count starts again once a frame arrives), waiting `initial_delay` seconds,
    doubled each time up to `max_delay`, with up to 20% jitter."""

    max_retries: int = 5
    initial_delay: float = 0.25
    max_delay: float = 5.0

    def delay(self, attempt: int) -> float:
        base = min(self.max_delay, self.initial_delay * (2.0 ** max(attempt - 1, 0)))
        return float(base * (1 + random.random() * 0.2))


@dataclass
class _Request:
    method: str
    path: str
    params: dict[str, Any] = field(default_factory=dict)
    json: JSON = None
    files: Mapping[str, FileInput] | None = None


def _segment(value: str) -> str:
    """`value` as one path segment. `.` and `..` are spelled with `%2E`: written plain, the
    URL would be normalized to the parent route (`/v1/sessions/.` is the session list)."""
    if value and value.strip(".") == "":
        return "%2E" * len(value)
    return quote(value, safe="")


def _params(**values: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else value
    return out


def _body(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def _file_part(name: str, value: FileInput) -> tuple[str, Any]:
    if isinstance(value, (str, os.PathLike)):
        path = Path(value)
        return name, (path.name, path.read_bytes(), "application/octet-stream")
    if isinstance(value, tuple) and len(value) in (2, 3):
        filename, content = value[0], value[1]
        media = value[2] if len(value) == 3 else "application/octet-stream"
        return name, (filename, content, media)
    raise TypeError(f"file `{name}`: give a path, or a (file name, bytes or binary file[, media type]) tuple")


def _encode(request: _Request) -> dict[str, Any]:
    """httpx keyword arguments for a request: JSON, or multipart with the JSON as `request`."""
    kwargs: dict[str, Any] = {"params": request.params}
    if request.files:
        parts: list[tuple[str, Any]] = [
            ("request", (None, json.dumps(request.json if request.json is not None else {}), "application/json"))
        ]
        for name, value in request.files.items():
            if name == "request":
                raise ValueError("a file input cannot be named `request`: that part holds the JSON body")
            parts.append(_file_part(name, value))
        kwargs["files"] = parts
    elif request.json is not None:
        kwargs["json"] = request.json
    return kwargs


def _result(response: httpx.Response) -> JSON:
    if response.status_code >= 400:
        raise error_from_response(response)
    if not response.content:
        return None
    return response.json()


def _headers(token: str | None, user_agent: str) -> dict[str, str]:
    headers = {"Accept": "application/json", "User-Agent": user_agent}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return headers


USER_AGENT = "archmax-client-python/0.1.0"


class _Operations:
    """Each API operation as a `_Request`: shared by the sync and the async client."""

    @staticmethod
    def start(
        workflow: str,
        message: str | None,
        *,
        trigger: str | None,
        variables: Mapping[str, JSON] | None,
        session_id: str | None,
        files: Mapping[str, FileInput] | None,
        wait: float | None,
    ) -> _Request:
        body = _body(message=message, trigger=trigger, variables=variables, sessionId=session_id)
        return _Request(
            "POST", f"/v1/workflows/{_segment(workflow)}/sessions", _params(wait=wait), body, files
        )

    @staticmethod
    def message(session_id: str, message: str, *, wait: float | None) -> _Request:
        return _Request(
            "POST", f"/v1/sessions/{_segment(session_id)}/messages", _params(wait=wait), {"message": message}
        )

    @staticmethod
    def decide(
        session_id: str, to: str, *, comment: str | None, raise_budget: bool | None, wait: float | None
    ) -> _Request:
        body = _body(to=to, comment=comment, raiseBudget=raise_budget)
        return _Request("POST", f"/v1/sessions/{_segment(session_id)}/decide", _params(wait=wait), body)

    @staticmethod
    def deliver(
        session_id: str,
        trigger: str,
        *,
        variables: Mapping[str, JSON] | None,
        message: str | None,
        files: Mapping[str, FileInput] | None,
        workflow: str | None,
        undeclared: bool | None,
        raise_budget: bool | None,
        wait: float | None,
    ) -> _Request:
        body = _body(
            trigger=trigger,
            variables=variables,
            message=message,
            workflow=workflow,
            undeclared=undeclared,
            raiseBudget=raise_budget,
        )
        return _Request("POST", f"/v1/sessions/{_segment(session_id)}/deliver", _params(wait=wait), body, files)

    @staticmethod
    def list(
        *,
        workflow: str | None,
        status: str | None,
        parked: bool | None,
        due: bool | None,
        limit: int | None,
        cursor: str | None,
    ) -> _Request:
        params = _params(workflow=workflow, status=status, parked=parked, due=due, limit=limit, cursor=cursor)
        return _Request("GET", "/v1/sessions", params)


class Client:
    """A synchronous client for `archmax serve`.

    ```python
    with Client("http://127.0.0.1:8787", token=os.environ["ARCHMAX_TOKEN"]) as archmax:
        session = archmax.start("refund-desk", "Refund ORD-1042, please.", wait=30)
        if session["status"] == "awaiting_decision":
            archmax.decide(session["sessionId"], "approve", comment="Fine.", wait=30)
    ```

    Every method returns the API's JSON (dicts and lists, as `GET /v1/openapi.json`
    describes them) and raises an `ArchmaxError` subclass for an error answer.
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: Retry | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._timeout = timeout
        self._retry = retry or Retry()
        self._own = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout)
        self._headers = _headers(token, USER_AGENT)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self._own:
            self._http.close()

    def _send(self, request: _Request) -> JSON:
        timeout = self._timeout + float(request.params.get("wait", 0) or 0)
        try:
            response = self._http.request(
                request.method, self._base + request.path, headers=self._headers, timeout=timeout, **_encode(request)
            )
        except httpx.TransportError as error:
            raise ArchmaxConnectionError(f"{request.method} {request.path}: {error}", cause=error) from error
        return _result(response)

    # Sessions

    def start(
        self,
        workflow: str,
        message: str,
        *,
        trigger: str | None = None,
        variables: Mapping[str, JSON] | None = None,
        session_id: str | None = None,
        files: Mapping[str, FileInput] | None = None,
        wait: float | None = None,
    ) -> JSON:
        """Start a session of `workflow`. With `files`, a multipart upload: each key is the
        `type: file` input the file fills. With `wait`, the session as it stands when the turn
        ended (with `turn`); without it `{"sessionId", "status": "running"}`."""
        return self._send(
            _Operations.start(
                workflow,
                message,
                trigger=trigger,
                variables=variables,
                session_id=session_id,
                files=files,
                wait=wait,
            )
        )

    def message(self, session_id: str, message: str, *, wait: float | None = None) -> JSON:
        """Continue a session with a message (a reply-only turn when it is parked at a decision)."""
        return self._send(_Operations.message(session_id, message, wait=wait))

    def decide(
        self,
        session_id: str,
        to: str,
        *,
        comment: str | None = None,
        raise_budget: bool | None = None,
        wait: float | None = None,
    ) -> JSON:
        """Decide a session parked at a human state: `to` is one of its `park.transitions`."""
        return self._send(
            _Operations.decide(session_id, to, comment=comment, raise_budget=raise_budget, wait=wait)
        )

    def deliver(
        self,
        session_id: str,
        trigger: str,
        *,
        variables: Mapping[str, JSON] | None = None,
        message: str | None = None,
        files: Mapping[str, FileInput] | None = None,
        workflow: str | None = None,
        undeclared: bool | None = None,
        raise_budget: bool | None = None,
        wait: float | None = None,
    ) -> JSON:
        """Deliver a trigger to a session waiting for input; `files` as for `start`."""
        return self._send(
            _Operations.deliver(
                session_id,
                trigger,
                variables=variables,
                message=message,
                files=files,
                workflow=workflow,
                undeclared=undeclared,
                raise_budget=raise_budget,
                wait=wait,
            )
        )

    def get(self, session_id: str) -> JSON:
        """One session, with its park record."""
        return self._send(_Request("GET", f"/v1/sessions/{_segment(session_id)}"))

    def transcript(self, session_id: str) -> JSON:
        """A session's messages: `{"sessionId", "messages"}`."""
        return self._send(_Request("GET", f"/v1/sessions/{_segment(session_id)}/transcript"))

    def list(
        self,
        *,
        workflow: str | None = None,
        status: str | None = None,
        parked: bool | None = None,
        due: bool | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JSON:
        """One page of sessions: `{"sessions", "nextCursor"}` (null on the last page)."""
        return self._send(
            _Operations.list(workflow=workflow, status=status, parked=parked, due=due, limit=limit, cursor=cursor)
        )

    def iter_sessions(
        self,
        *,
        workflow: str | None = None,
        status: str | None = None,
        parked: bool | None = None,
        due: bool | None = None,
        limit: int | None = None,
    ) -> Iterator[JSON]:
        """Every session the filters select, page after page (following `nextCursor`)."""
        cursor: str | None = None
        while True:
            page = self.list(workflow=workflow, status=status, parked=parked, due=due, limit=limit, cursor=cursor)
            yield from page.get("sessions", [])
            cursor = page.get("nextCursor")
            if not cursor:
                return

    def workflows(self) -> JSON:
        """The catalog: every served workflow with its triggers' inputs (JSON Schema and
        `fileInputs`) and its human states' transitions: `{"workflows": [...]}`."""
        return self._send(_Request("GET", "/v1/workflows"))

    def openapi(self) -> JSON:
        """The server's OpenAPI 3.1 document."""
        return self._send(_Request("GET", "/v1/openapi.json"))

    # Events

    def events(
        self,
        session_id: str,
        *,
        last_event_id: int | None = None,
        retry: Retry | None = None,
        read_timeout: float | None = 60.0,
    ) -> "EventStream":
        """The session's events, live, as an iterator of `Event`s (endless: break out, or
        `close()` it). A disconnect reconnects with `Last-Event-ID`, so every event arrives
        once and in order; `retry` bounds the attempts, after which `ArchmaxConnectionError`
        is raised. An error answer (404, 401, ...) is raised as its `ArchmaxError` at once."""
        return EventStream(self, session_id, last_event_id, retry or self._retry, read_timeout)


class EventStream:
    """An iterator over one session's events that resumes after a disconnect."""

    def __init__(
        self, client: Client, session_id: str, last_event_id: int | None, retry: Retry, read_timeout: float | None
    ) -> None:
        self._client = client
        self._path = f"/v1/sessions/{_segment(session_id)}/events"
        self.last_event_id = last_event_id
        self.reconnects = 0
        self._retry = retry
        self._read_timeout = read_timeout
        self._response: httpx.Response | None = None
        self._closed = False
        self._iterator = self._run()

    def __iter__(self) -> "EventStream":
        return self

    def __next__(self) -> Event:
        return next(self._iterator)

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True
        if self._response is not None:
            self._response.close()
        self._iterator.close()

    def _run(self) -> Generator[Event, None, None]:
        client = self._client
        failures = 0
        while not self._closed:
            headers = dict(client._headers, Accept="text/event-stream")
            if self.last_event_id is not None:
                headers["Last-Event-ID"] = str(self.last_event_id)
            timeout = httpx.Timeout(client._timeout, read=self._read_timeout)
            problem: BaseException | None = None
            try:
                with client._http.stream("GET", client._base + self._path, headers=headers, timeout=timeout) as response:
                    self._response = response
                    if response.status_code >= 400:
                        response.read()
                        error = error_from_response(response)
                        if not isinstance(error, (ServerError, RateLimitedError)):
                            raise error
                        problem = error
                    else:
                        parser = SseParser()
                        for line in response.iter_lines():
                            event = parser.feed(line)
                            if event is not None:
                                failures = 0
                                self.last_event_id = event.id
                                yield event
            except ArchmaxError:
                if problem is None:
                    raise
            except (httpx.TransportError, httpx.StreamError) as error:
                problem = error
            finally:
                self._response = None
            if self._closed:
                return
            failures += 1
            if failures > self._retry.max_retries:
                raise ArchmaxConnectionError(
                    f"the event stream of {self._path} stopped after {self._retry.max_retries} reconnects: {problem}",
                    cause=problem,
                )
            self.reconnects += 1
            delay = self._retry.delay(failures)
            if isinstance(problem, RateLimitedError) and problem.retry_after:
                delay = max(delay, problem.retry_after)
            time.sleep(delay)


class AsyncClient:
    """The asynchronous client: the same operations as `Client`, each awaited.

    ```python
    async with AsyncClient("http://127.0.0.1:8787", token=token) as archmax:
        session = await archmax.start("refund-desk", "Refund ORD-1042.", wait=30)
        async for event in archmax.events(session["sessionId"]):
            ...
    ```
    """

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: Retry | None = None,
        http_client: httpx.AsyncClient | None = None,
    ) -> None:
        self._base = base_url.rstrip("/")
        self._timeout = timeout
        self._retry = retry or Retry()
        self._own = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout)
        self._headers = _headers(token, USER_AGENT)

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._own:
            await self._http.aclose()

    async def _send(self, request: _Request) -> JSON:
        timeout = self._timeout + float(request.params.get("wait", 0) or 0)
        try:
            response = await self._http.request(
                request.method, self._base + request.path, headers=self._headers, timeout=timeout, **_encode(request)
            )
        except httpx.TransportError as error:
            raise ArchmaxConnectionError(f"{request.method} {request.path}: {error}", cause=error) from error
        return _result(response)

    async def start(
        self,
        workflow: str,
        message: str,
        *,
        trigger: str | None = None,
        variables: Mapping[str, JSON] | None = None,
        session_id: str | None = None,
        files: Mapping[str, FileInput] | None = None,
        wait: float | None = None,
    ) -> JSON:
        """See `Client.start`."""
        return await self._send(
            _Operations.start(
                workflow,
                message,
                trigger=trigger,
                variables=variables,
                session_id=session_id,
                files=files,
                wait=wait,
            )
        )

    async def message(self, session_id: str, message: str, *, wait: float | None = None) -> JSON:
        """See `Client.message`."""
        return await self._send(_Operations.message(session_id, message, wait=wait))

    async def decide(
        self,
        session_id: str,
        to: str,
        *,
        comment: str | None = None,
        raise_budget: bool | None = None,
        wait: float | None = None,
    ) -> JSON:
        """See `Client.decide`."""
        return await self._send(
            _Operations.decide(session_id, to, comment=comment, raise_budget=raise_budget, wait=wait)
        )

    async def deliver(
        self,
        session_id: str,
        trigger: str,
        *,
        variables: Mapping[str, JSON] | None = None,
        message: str | None = None,
        files: Mapping[str, FileInput] | None = None,
        workflow: str | None = None,
        undeclared: bool | None = None,
        raise_budget: bool | None = None,
        wait: float | None = None,
    ) -> JSON:
        """See `Client.deliver`."""
        return await self._send(
            _Operations.deliver(
                session_id,
                trigger,
                variables=variables,
                message=message,
                files=files,
                workflow=workflow,
                undeclared=undeclared,
                raise_budget=raise_budget,
                wait=wait,
            )
        )

    async def get(self, session_id: str) -> JSON:
        """See `Client.get`."""
        return await self._send(_Request("GET", f"/v1/sessions/{_segment(session_id)}"))

    async def transcript(self, session_id: str) -> JSON:
        """See `Client.transcript`."""
        return await self._send(_Request("GET", f"/v1/sessions/{_segment(session_id)}/transcript"))

    async def list(
        self,
        *,
        workflow: str | None = None,
        status: str | None = None,
        parked: bool | None = None,
        due: bool | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> JSON:
        """See `Client.list`."""
        return await self._send(
            _Operations.list(workflow=workflow, status=status, parked=parked, due=due, limit=limit, cursor=cursor)
        )

    async def iter_sessions(
        self,
        *,
        workflow: str | None = None,
        status: str | None = None,
        parked: bool | None = None,
        due: bool | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[JSON]:
        """See `Client.iter_sessions`."""
        cursor: str | None = None
        while True:
            page = await self.list(
                workflow=workflow, status=status, parked=parked, due=due, limit=limit, cursor=cursor
            )
            for session in page.get("sessions", []):
                yield session
            cursor = page.get("nextCursor")
            if not cursor:
                return

    async def workflows(self) -> JSON:
        """See `Client.workflows`."""
        return await self._send(_Request("GET", "/v1/workflows"))

    async def openapi(self) -> JSON:
        """See `Client.openapi`."""
        return await self._send(_Request("GET", "/v1/openapi.json"))

    def events(
        self,
        session_id: str,
        *,
        last_event_id: int | None = None,
        retry: Retry | None = None,
        read_timeout: float | None = 60.0,
    ) -> "AsyncEventStream":
        """See `Client.events`: the same stream, as an async iterator."""
        return AsyncEventStream(self, session_id, last_event_id, retry or self._retry, read_timeout)


class AsyncEventStream:
    """An async iterator over one session's events that resumes after a disconnect."""

    def __init__(
        self,
        client: AsyncClient,
        session_id: str,
        last_event_id: int | None,
        retry: Retry,
        read_timeout: float | None,
    ) -> None:
        self._client = client
        self._path = f"/v1/sessions/{_segment(session_id)}/events"
        self.last_event_id = last_event_id
        self.reconnects = 0
        self._retry = retry
        self._read_timeout = read_timeout
        self._closed = False
        self._iterator = self._run()

    def __aiter__(self) -> "AsyncEventStream":
        return self

    async def __anext__(self) -> Event:
        return await self._iterator.__anext__()

    async def __aenter__(self) -> "AsyncEventStream":
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        await self._iterator.aclose()

    async def _run(self) -> AsyncGenerator[Event, None]:
        client = self._client
        failures = 0
        while not self._closed:
            headers = dict(client._headers, Accept="text/event-stream")
            if self.last_event_id is not None:
                headers["Last-Event-ID"] = str(self.last_event_id)
            timeout = httpx.Timeout(client._timeout, read=self._read_timeout)
            problem: BaseException | None = None
            try:
                async with client._http.stream(
                    "GET", client._base + self._path, headers=headers, timeout=timeout
                ) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        error = error_from_response(response)
                        if not isinstance(error, (ServerError, RateLimitedError)):
                            raise error
                        problem = error
                    else:
                        parser = SseParser()
                        async for line in response.aiter_lines():
                            event = parser.feed(line)
                            if event is not None:
                                failures = 0
                                self.last_event_id = event.id
                                yield event
            except ArchmaxError:
                if problem is None:
                    raise
            except (httpx.TransportError, httpx.StreamError) as error:
                problem = error
            if self._closed:
                return
            failures += 1
            if failures > self._retry.max_retries:
                raise ArchmaxConnectionError(
                    f"the event stream of {self._path} stopped after {self._retry.max_retries} reconnects: {problem}",
                    cause=problem,
                )
            self.reconnects += 1
            delay = self._retry.delay(failures)
            if isinstance(problem, RateLimitedError) and problem.retry_after:
                delay = max(delay, problem.retry_after)
            await asyncio.sleep(delay)
