// The parts that need no server: the SSE parser over split chunks, and the error classes by status.

import assert from "node:assert/strict";
import { test } from "node:test";

import {
  ArchmaxError,
  ConflictError,
  ForbiddenError,
  InvalidInputError,
  PayloadTooLargeError,
  RateLimitedError,
  ServerError,
  UnauthorizedError,
  errorFromResponse,
  parseSse,
} from "../src/index.js";

/** A body stream that delivers `text` in the given pieces. */
function body(...pieces: string[]): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const piece of pieces) controller.enqueue(encoder.encode(piece));
      controller.close();
    },
  });
}

async function frames(stream: ReadableStream<Uint8Array>): Promise<[number, string, unknown][]> {
  const out: [number, string, unknown][] = [];
  for await (const frame of parseSse(stream)) out.push([frame.id, frame.event, frame.data]);
  return out;
}

test("the parser reads frames, comments and multi-line data across any split", async () => {
  const text =
    ": keep-alive\n\n" +
    'id: 1\nevent: archmax\ndata: {"event":"state-enter"}\n\n' +
    'id:2\r\nevent: archmax\r\ndata: {"a":\r\ndata: 1}\r\n\r\n' +
    "retry: 1000\n\n" +
    "id: 3\rdata: not json\r\r";
  const expected = [
    [1, "archmax", { event: "state-enter" }],
    [2, "archmax", { a: 1 }],
    [3, "message", "not json"],
  ];
  assert.deepEqual(await frames(body(text)), expected);
  // Every split point, one byte at a time included: a \r\n cut between its halves is one line ending.
  for (let at = 1; at < text.length; at++) {
    assert.deepEqual(await frames(body(text.slice(0, at), text.slice(at))), expected, `split at ${at}`);
  }
  assert.deepEqual(await frames(body(...text.split(""))), expected);
});

test("a frame cut before its blank line is never yielded", async () => {
  assert.deepEqual(await frames(body('id: 1\ndata: {}\n\nid: 2\ndata: {"cut":')), [[1, "message", {}]]);
});

test("a frame without a numeric id is skipped", async () => {
  assert.deepEqual(await frames(body("data: {}\n\nid: x\ndata: {}\n\n")), []);
});

test("each status is its own error class", async () => {
  const cases: [number, typeof ArchmaxError][] = [
    [400, InvalidInputError],
    [401, UnauthorizedError],
    [403, ForbiddenError],
    [409, ConflictError],
    [413, PayloadTooLargeError],
    [429, RateLimitedError],
    [500, ServerError],
    [503, ServerError],
  ];
  for (const [status, Kind] of cases) {
    const answer = new Response(
      JSON.stringify({ error: { code: "some.code", message: "It went wrong.", details: { fields: [] } } }),
      { status, headers: { "content-type": "application/json", "retry-after": "7" } },
    );
    const error = await errorFromResponse(answer);
    assert.equal(error.constructor, Kind, `${status}`);
    assert.deepEqual([error.status, error.code, error.message, error.retryAfter], [status, "some.code", "It went wrong.", 7]);
  }
});

test("an answer that is not the error shape keeps its status", async () => {
  const error = await errorFromResponse(new Response("<html>proxy</html>", { status: 502 }));
  assert.ok(error instanceof ServerError);
  assert.deepEqual([error.status, error.code, error.details], [502, "http.502", {}]);
  assert.equal((await errorFromResponse(new Response("", { status: 408 }))).constructor, ArchmaxError);
});

test("the event stream resumes after the last whole frame and gives up after its retries", async () => {
  const { ArchmaxClient, ArchmaxConnectionError } = await import("../src/index.js");
  const seen: (string | null)[] = [];
  const answers = [
    ['id: 1\ndata: {"n":1}\n\nid: 2\ndata: {"n":2}\n\nid: 3\ndata: {"n"'],
    ['id: 3\ndata: {"n":3}\n\n', 'id: 4\ndata: {"n":4}\n\n'],
  ];
  const fakeFetch = (async (_url: string | URL | Request, init?: RequestInit) => {
    seen.push(new Headers(init?.headers).get("last-event-id"));
    const pieces = answers.shift();
    if (!pieces) {
      return new Response(JSON.stringify({ error: { code: "x", message: "down", details: {} } }), { status: 503 });
    }
    return new Response(body(...pieces), { headers: { "content-type": "text/event-stream" } });
  }) as typeof fetch;
  const client = new ArchmaxClient("http://archmax.test", { fetch: fakeFetch, retry: { maxRetries: 2, initialDelayMs: 1 } });
  const stream = client.events("s1");
  const ids: number[] = [];
  await assert.rejects(async () => {
    for await (const event of stream) ids.push(event.id);
  }, ArchmaxConnectionError);
  assert.deepEqual(ids, [1, 2, 3, 4]);
  // The second answer ended (one failure), then two 503s: two retries, each after frame 4.
  assert.deepEqual(seen, [null, "2", "4", "4"]);
  assert.equal(stream.reconnects, 3);
});
