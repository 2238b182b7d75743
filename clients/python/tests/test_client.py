"""The Python client against a live `archmax serve` on clients/testdata's tape."""

from __future__ import annotations

import asyncio

import pytest

from archmax_client import (
    ArchmaxError,
    AsyncClient,
    AuthError,
    Client,
    ConflictError,
    Event,
    InvalidInputError,
    NotFoundError,
    PayloadTooLargeError,
    Retry,
    UnauthorizedError,
)

from .conftest import CuttingProxy

SLIP = b"1 x walnut board\n"


def test_start_parks_at_the_decision_and_a_decision_completes_it(client: Client, session_id: str) -> None:
    started = client.start("desk", "Please pay out 120 EUR.", session_id=session_id, wait=30)
    assert started["sessionId"] == session_id
    assert started["status"] == "awaiting_decision", started
    assert started["park"]["state"] == "review"
    assert [t["to"] for t in started["park"]["transitions"]] == ["paid", "declined"]
    assert client.get(session_id)["status"] == "awaiting_decision"

    decided = client.decide(session_id, "paid", comment="Fine by finance.", wait=30)
    assert decided["status"] == "completed", decided
    assert decided["workflowState"] == "paid"
    assert decided["turn"]["reply"] == "Your payout was paid."
    assert decided["trail"][-1]["decidedBy"] == "admin"

    transcript = client.transcript(session_id)
    assert transcript["sessionId"] == session_id
    assert "Your payout was paid." in str(transcript["messages"])


def test_without_wait_a_start_is_accepted_and_runs_on(client: Client, session_id: str) -> None:
    accepted = client.start("desk", "Pay out 5 EUR.", session_id=session_id)
    assert (accepted["sessionId"], accepted["status"]) == (session_id, "running")
    events = client.events(session_id)
    with events:
        for event in events:
            if event.kind == "turn-end":
                assert event.data["status"] == "awaiting_decision"
                break
    assert client.get(session_id)["status"] == "awaiting_decision"


def test_a_message_to_a_parked_session_is_a_reply_only_turn(client: Client, session_id: str) -> None:
    client.start("desk", "Pay out 7 EUR.", session_id=session_id, wait=30)
    answered = client.message(session_id, "Any news?", wait=30)
    assert answered["status"] == "awaiting_decision", answered


def test_list_pages_through_every_session(client: Client) -> None:
    ids = [client.start("desk", "Page me.", wait=30)["sessionId"] for _ in range(3)]
    first = client.list(workflow="desk", limit=2)
    assert len(first["sessions"]) == 2
    assert first["nextCursor"]
    listed = [s["sessionId"] for s in client.iter_sessions(workflow="desk", limit=2)]
    assert len(listed) == len(set(listed)), "no session twice across pages"
    assert set(ids) <= set(listed)
    assert listed == sorted(listed), "pages come in id order"
    parked = [s["sessionId"] for s in client.iter_sessions(workflow="desk", status="awaiting_decision", limit=1)]
    assert set(ids) <= set(parked)


def test_the_catalog_lists_inputs_files_and_decisions(client: Client) -> None:
    catalog = {w["slug"]: w for w in client.workflows()["workflows"]}
    assert set(catalog) == {"desk", "slips"}
    assert [t["to"] for t in catalog["desk"]["humanStates"][0]["transitions"]] == ["paid", "declined"]
    slip_sent = next(t for t in catalog["slips"]["triggers"] if t["id"] == "slip_sent")
    assert slip_sent["fileInputs"] == ["slip"]
    assert slip_sent["inputs"]["required"] == ["slip"]


def test_a_delivery_with_a_file_lands_in_the_session(client: Client, session_id: str, tmp_path) -> None:
    waiting = client.start("slips", "I will send the slip.", session_id=session_id, wait=30)
    assert waiting["status"] == "awaiting_input", waiting
    slip = tmp_path / "Packing Slip 2291.TXT"
    slip.write_bytes(SLIP)
    delivered = client.deliver(session_id, "slip_sent", files={"slip": slip}, wait=30)
    assert delivered["status"] == "completed", delivered
    assert delivered["variables"]["slip"] == {"value": "scratchpad/inputs/slip.txt", "locked": True}
    assert delivered["turn"]["reply"] == "The slip lists one walnut board."
    assert "1 x walnut board" in str(client.transcript(session_id)["messages"])


def test_a_start_with_a_file_takes_it_from_bytes(client: Client, session_id: str) -> None:
    started = client.start(
        "slips",
        "Here is the slip.",
        trigger="slip_sent",
        session_id=session_id,
        files={"slip": ("slip-from-memory.txt", SLIP, "text/plain")},
        wait=30,
    )
    assert started["variables"]["slip"]["value"] == "scratchpad/inputs/slip.txt", started


def test_a_file_the_input_does_not_accept_is_a_typed_400(client: Client, session_id: str) -> None:
    client.start("slips", "I will send the slip.", session_id=session_id, wait=30)
    with pytest.raises(InvalidInputError) as refused:
        client.deliver(session_id, "slip_sent", files={"slip": ("slip.pdf", SLIP)}, wait=30)
    assert refused.value.status == 400
    assert refused.value.code == "input.invalid"
    assert [f["field"] for f in refused.value.fields] == ["slip"]


def test_errors_are_typed(client: Client, base_url: str, session_id: str) -> None:
    with pytest.raises(NotFoundError) as missing:
        client.get("no-such-session")
    assert (missing.value.status, missing.value.code) == (404, "session.unknown")
    assert "no-such-session" in missing.value.message
    assert isinstance(missing.value, ArchmaxError)

    with pytest.raises(NotFoundError):
        client.start("no-such-workflow", "Hello.")

    # A dot segment is sent as the id it is, not folded into the route above it.
    for dots in (".", ".."):
        for ask in (client.get, client.transcript):
            with pytest.raises(InvalidInputError) as dotted:
                ask(dots)
            assert dotted.value.status == 400 and f"`{dots}`" in dotted.value.message, dotted.value.message

    with pytest.raises(InvalidInputError) as invalid:
        client.list(limit=0)
    assert invalid.value.status == 400
    assert invalid.value.fields == [{"field": "limit", "problem": "must be a whole number from 1 to 500"}]

    client.start("desk", "Pay out 3 EUR.", session_id=session_id, wait=30)
    with pytest.raises(InvalidInputError) as bad_decision:
        client.decide(session_id, "nowhere", wait=30)
    assert bad_decision.value.status == 400

    with pytest.raises(ConflictError) as exists:
        client.start("desk", "Again.", session_id=session_id, wait=30)
    assert exists.value.status == 409

    with Client(base_url, token="not-the-token-at-all") as stranger:
        with pytest.raises(UnauthorizedError) as denied:
            stranger.get(session_id)
    assert isinstance(denied.value, AuthError)
    assert denied.value.status == 401

    with pytest.raises(NotFoundError):
        next(iter(client.events("no-such-session")))

    with pytest.raises(PayloadTooLargeError) as too_large:
        client.start("desk", "x" * (1024 * 1024 + 1))
    assert (too_large.value.status, too_large.value.code) == (413, "request.too-large")


def _read_until_complete(events, on_parked=None) -> list[Event]:
    seen: list[Event] = []
    for event in events:
        seen.append(event)
        if event.kind == "turn-end":
            if event.data.get("terminal"):
                return seen
            if on_parked is not None:
                on_parked()
                on_parked = None
    raise AssertionError("the stream ended")


def test_an_event_stream_resumes_after_a_disconnect_with_every_event_once(
    client: Client, token: str, session_id: str, cutting_proxy: CuttingProxy
) -> None:
    client.start("desk", "Please pay out 40 EUR.", session_id=session_id, wait=30)
    with Client(cutting_proxy.url, token=token, retry=Retry(max_retries=3, initial_delay=0.05)) as through_proxy:
        stream = through_proxy.events(session_id)
        with stream:
            seen = _read_until_complete(stream, lambda: client.decide(session_id, "paid", wait=30))
        assert cutting_proxy.cuts == 1 and cutting_proxy.event_streams >= 2, "the stream was cut and reopened"
        assert stream.reconnects >= 1

    ids = [event.id for event in seen]
    assert ids == list(range(ids[0], ids[0] + len(ids))), f"every id once, in order: {ids}"
    # The same session's stream read whole, without a cut, holds exactly these events.
    with client.events(session_id) as whole:
        direct = _read_until_complete(whole)
    assert [(e.id, e.data) for e in direct] == [(e.id, e.data) for e in seen]
    assert seen[-1].data["status"] == "completed"


def test_an_event_stream_starts_after_last_event_id(client: Client, session_id: str) -> None:
    client.start("desk", "Pay out 1 EUR.", session_id=session_id, wait=30)
    with client.events(session_id) as whole:
        ids = [next(whole).id for _ in range(6)]
    with client.events(session_id, last_event_id=ids[4]) as stream:
        first = next(stream)
    assert first.id == ids[5]


def test_an_event_stream_gives_up_after_its_retries(token: str) -> None:
    with socket_closed_port() as url:
        with Client(url, token=token, retry=Retry(max_retries=2, initial_delay=0.01)) as nowhere:
            stream = nowhere.events("any-session")
            with pytest.raises(ArchmaxError) as gave_up:
                next(stream)
    assert gave_up.value.code == "connection"
    assert stream.reconnects == 2


class socket_closed_port:
    """A loopback address where nothing listens."""

    def __enter__(self) -> str:
        import socket

        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *_: object) -> None:
        pass


def test_the_async_client_runs_the_same_session_and_resumes_its_stream(
    base_url: str, token: str, session_id: str, cutting_proxy: CuttingProxy
) -> None:
    async def scenario() -> None:
        async with AsyncClient(base_url, token=token) as archmax:
            started = await archmax.start("desk", "Pay out 9 EUR.", session_id=session_id, wait=30)
            assert started["status"] == "awaiting_decision"
            listed = [s["sessionId"] async for s in archmax.iter_sessions(workflow="desk", limit=1)]
            assert session_id in listed
            with pytest.raises(NotFoundError):
                await archmax.get("no-such-session")
            async with AsyncClient(cutting_proxy.url, token=token, retry=Retry(initial_delay=0.05)) as proxied:
                seen: list[Event] = []
                decided = False
                async with proxied.events(session_id) as stream:
                    async for event in stream:
                        seen.append(event)
                        if event.kind == "turn-end" and not decided:
                            decided = True
                            done = await archmax.decide(session_id, "declined", comment="No.", wait=30)
                            assert done["status"] == "completed"
                        elif event.kind == "turn-end":
                            break
                assert stream.reconnects >= 1
            ids = [e.id for e in seen]
            assert ids == list(range(ids[0], ids[0] + len(ids))), ids
            assert seen[-1].data["state"] == "declined"

    asyncio.run(scenario())
