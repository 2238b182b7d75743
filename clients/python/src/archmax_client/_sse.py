"""A Server-Sent Events parser (the WHATWG rules the API's event streams need)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Event:
    """One frame of a session's event stream.

    `id` is the frame's numeric id (send it back as Last-Event-ID to resume after it),
    `event` the frame's event name (`archmax`), `data` the event as parsed JSON (its
    `event` member names the kind, such as `state-enter` or `turn-end`).
    """

    id: int
    event: str
    data: Any

    @property
    def kind(self) -> str | None:
        """The event's kind (`data["event"]`), such as `parked` or `turn-end`."""
        return self.data.get("event") if isinstance(self.data, dict) else None


class SseParser:
    """Feed it lines (without their line ending); it returns a frame at each blank line.

    A frame cut off by a disconnect (no blank line yet) is never returned: the caller
    resumes after the last frame it got, and the server sends the cut one again.
    """

    def __init__(self) -> None:
        self._data: list[str] = []
        self._event = ""
        self._id: str | None = None

    def feed(self, line: str) -> Event | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        field, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "event":
            self._event = value
        elif field == "id" and "\0" not in value:
            self._id = value
        return None

    def _dispatch(self) -> Event | None:
        data, event, frame_id = self._data, self._event or "message", self._id
        self._data, self._event, self._id = [], "", None
        if not data or frame_id is None or not frame_id.isdigit():
            return None
        text = "\n".join(data)
        try:
            parsed: Any = json.loads(text)
        except ValueError:
            parsed = text
        return Event(int(frame_id), event, parsed)
