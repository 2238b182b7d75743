/** A Server-Sent Events parser over a fetch body stream (the WHATWG rules the API's streams need). */

/** One frame of a session's event stream. */
export interface ArchmaxEvent<T = Record<string, unknown>> {
  /** The frame's numeric id: send it back as Last-Event-ID to resume after it. */
  id: number;
  /** The frame's event name (`archmax`). */
  event: string;
  /** The event, parsed: its `event` member names the kind (`state-enter`, `turn-end`, …). */
  data: T;
}

/**
 * Frames from a byte stream. A frame cut off by a disconnect (no blank line yet) is never
 * yielded: the caller resumes after the last frame it got, and the server sends it again.
 */
export async function* parseSse(body: ReadableStream<Uint8Array>): AsyncGenerator<ArchmaxEvent> {
  const decoder = new TextDecoder();
  let buffer = "";
  let data: string[] = [];
  let event = "";
  let id: string | undefined;
  const reader = body.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (!done) buffer += decoder.decode(value, { stream: true });
      for (;;) {
        const end = buffer.search(/\r\n|\r|\n/);
        if (end < 0) break;
        // A lone \r at the end of the buffer may be the first half of \r\n: wait for more,
        // unless the stream has ended.
        if (buffer[end] === "\r" && end === buffer.length - 1 && !done) break;
        const line = buffer.slice(0, end);
        buffer = buffer.slice(buffer.startsWith("\r\n", end) ? end + 2 : end + 1);
        if (line === "") {
          if (data.length > 0 && id !== undefined && /^[0-9]+$/.test(id)) {
            const text = data.join("\n");
            let parsed: unknown;
            try {
              parsed = JSON.parse(text);
            } catch {
              parsed = text;
            }
            yield { id: Number(id), event: event || "message", data: parsed as Record<string, unknown> };
          }
          data = [];
          event = "";
          id = undefined;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" ")) value = value.slice(1);
        if (field === "data") data.push(value);
        else if (field === "event") event = value;
        else if (field === "id" && !value.includes("\0")) id = value;
      }
      if (done) return;
    }
  } finally {
    // Done early (a `break`) or cut: let go of the connection.
    await reader.cancel().catch(() => undefined);
  }
}
