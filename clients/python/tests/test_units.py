"""The parts that need no server: the SSE parser and the error classes by status."""

from __future__ import annotations

import httpx
import pytest

from archmax_client import (
    ArchmaxError,
    ConflictError,
    ForbiddenError,
    InvalidInputError,
    PayloadTooLargeError,
    RateLimitedError,
    ServerError,
    UnauthorizedError,
)
from archmax_client._sse import SseParser
from archmax_client.errors import error_from_response


def frames(text: str) -> list[tuple[int, str, object]]:
    parser = SseParser()
    out = []
    for line in text.splitlines():
        event = parser.feed(line)
        if event is not None:
            out.append((event.id, event.event, event.data))
    return out


def test_the_parser_reads_frames_comments_and_multiline_data() -> None:
    text = (
        ": keep-alive\n\n"
        "id: 1\nevent: archmax\ndata: {\"event\":\"state-enter\"}\n\n"
        "id:2\r\nevent: archmax\r\ndata: {\"a\":\r\ndata: 1}\r\n\r\n"
        "retry: 1000\n\n"
        "id: 3\ndata: not json\n\n"
    )
    assert frames(text) == [
        (1, "archmax", {"event": "state-enter"}),
        (2, "archmax", {"a": 1}),
        (3, "message", "not json"),
    ]


def test_a_frame_cut_before_its_blank_line_is_never_returned() -> None:
    assert frames("id: 1\ndata: {}\n\nid: 2\ndata: {\"cut\":") == [(1, "message", {})]


def test_a_frame_without_a_numeric_id_is_skipped() -> None:
    assert frames("data: {}\n\nid: x\ndata: {}\n\n") == []


def answer(status: int, body: object = None, headers: dict[str, str] | None = None) -> httpx.Response:
    request = httpx.Request("GET", "http://archmax.test/v1/sessions/x")
    if body is None:
        return httpx.Response(status, text="<html>proxy</html>", headers=headers, request=request)
    return httpx.Response(status, json=body, headers=headers, request=request)


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, InvalidInputError),
        (401, UnauthorizedError),
        (403, ForbiddenError),
        (409, ConflictError),
        (413, PayloadTooLargeError),
        (429, RateLimitedError),
        (500, ServerError),
        (503, ServerError),
    ],
)
def test_each_status_is_its_class(status: int, cls: type[ArchmaxError]) -> None:
    body = {"error": {"code": "some.code", "message": "It went wrong.", "details": {"fields": []}}}
    error = error_from_response(answer(status, body, {"Retry-After": "7"}))
    assert type(error) is cls
    assert (error.status, error.code, error.message, error.retry_after) == (status, "some.code", "It went wrong.", 7.0)


def test_an_answer_that_is_not_the_error_shape_keeps_its_status() -> None:
    error = error_from_response(answer(502))
    assert type(error) is ServerError
    assert (error.status, error.code, error.details) == (502, "http.502", {})
    assert type(error_from_response(answer(408))) is ArchmaxError


SSE_TEXT = (
    ": keep-alive\n\n"
    'id: 1\nevent: archmax\ndata: {"event":"state-enter"}\n\n'
    'id:2\r\nevent: archmax\r\ndata: {"a":\r\ndata: 1}\r\n\r\n'
    "id: 3\rdata: not json\r\r"
)


def sse_answer(pieces: list[str]) -> httpx.Response:
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, stream=_Chunks(pieces))


class _Chunks(httpx.SyncByteStream):
    def __init__(self, pieces: list[str]) -> None:
        self._pieces = pieces

    def __iter__(self):  # type: ignore[override]
        for piece in self._pieces:
            yield piece.encode()


def test_the_event_stream_reads_any_split_of_the_bytes() -> None:
    from archmax_client import Client, Retry

    expected = [(1, {"event": "state-enter"}), (2, {"a": 1}), (3, "not json")]
    for at in range(1, len(SSE_TEXT)):
        pieces = [SSE_TEXT[:at], SSE_TEXT[at:]]
        transport = httpx.MockTransport(lambda request: sse_answer(pieces))
        with Client("http://archmax.test", http_client=httpx.Client(transport=transport), retry=Retry(max_retries=0)) as c:
            stream = c.events("s1")
            assert [(e.id, e.data) for e in (next(stream), next(stream), next(stream))] == expected, f"split at {at}"
    transport = httpx.MockTransport(lambda request: sse_answer(list(SSE_TEXT)))
    with Client("http://archmax.test", http_client=httpx.Client(transport=transport)) as c:
        stream = c.events("s1")
        assert [(e.id, e.data) for e in (next(stream), next(stream), next(stream))] == expected


def test_the_event_stream_resumes_after_the_last_whole_frame() -> None:
    from archmax_client import Client, Retry

    seen_headers: list[str | None] = []
    answers = [
        ['id: 1\ndata: {"n":1}\n\nid: 2\ndata: {"n":2}\n\nid: 3\ndata: {"n"'],  # cut mid-frame
        ['id: 3\ndata: {"n":3}\n\n', 'id: 4\ndata: {"n":4}\n\n'],
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        seen_headers.append(request.headers.get("last-event-id"))
        return sse_answer(answers.pop(0)) if answers else httpx.Response(503, json={"error": {"code": "x", "message": "down", "details": {}}})

    transport = httpx.MockTransport(handler)
    with Client("http://archmax.test", http_client=httpx.Client(transport=transport), retry=Retry(max_retries=2, initial_delay=0.001)) as c:
        stream = c.events("s1", last_event_id=None)
        ids = [next(stream).id for _ in range(4)]
        assert ids == [1, 2, 3, 4]
        assert seen_headers == [None, "2"]
        with pytest.raises(ArchmaxError) as gave_up:
            next(stream)
    assert gave_up.value.code == "connection"
    # The second answer ended (one failure), then two 503s: two retries, each after frame 4.
    assert seen_headers == [None, "2", "4", "4"], "each retry resumes after the last frame"
