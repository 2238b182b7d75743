// The TypeScript client against a live `archmax serve` on clients/testdata's tape
// (ARCHMAX_BASE_URL and ARCHMAX_TOKEN come from test.sh).

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, writeFile } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import {
  ArchmaxClient,
  ArchmaxConnectionError,
  ArchmaxError,
  AuthError,
  ConflictError,
  InvalidInputError,
  NotFoundError,
  PayloadTooLargeError,
  UnauthorizedError,
  fileFromPath,
  isSession,
  type ArchmaxEvent,
  type EventData,
  type Session,
  type TurnAnswer,
} from "../src/index.js";

const baseUrl = process.env.ARCHMAX_BASE_URL ?? "";
const token = process.env.ARCHMAX_TOKEN ?? "";
if (!baseUrl || !token) throw new Error("ARCHMAX_BASE_URL and ARCHMAX_TOKEN are unset: run clients/typescript/test.sh");

const client = new ArchmaxClient(baseUrl, { token });
const SLIP = "1 x walnut board\n";

function freshId(): string {
  return `ts-${randomBytes(6).toString("hex")}`;
}

function session(answer: TurnAnswer): Session {
  assert.ok(isSession(answer), `the turn ended within the wait: ${JSON.stringify(answer)}`);
  return answer;
}

function kind(event: ArchmaxEvent<EventData>): string {
  return String((event.data as { event?: unknown }).event);
}

/**
 * A TCP proxy to the server that cuts the first event stream it carries after `cutAfter`
 * bytes of the answer (mid-frame, as a dropped connection would) and passes everything
 * else through whole.
 */
class CuttingProxy {
  eventStreams = 0;
  cuts = 0;
  url = "";
  private server = net.createServer((downstream) => this.serve(downstream));
  private sockets = new Set<net.Socket>();

  constructor(private readonly cutAfter: number) {}

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, "127.0.0.1", resolve));
    const address = this.server.address() as net.AddressInfo;
    this.url = `http://127.0.0.1:${address.port}`;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private serve(downstream: net.Socket): void {
    const target = new URL(baseUrl);
    const upstream = net.connect(Number(target.port), target.hostname);
    this.sockets.add(downstream).add(upstream);
    let limit: number | undefined;
    let decided = false;
    let sent = 0;
    downstream.on("data", (chunk: Buffer) => {
      if (!decided) {
        decided = true;
        const requestLine = chunk.toString("latin1").split("\r\n", 1)[0] ?? "";
        if (requestLine.includes("/events")) {
          this.eventStreams += 1;
          if (this.cuts === 0) {
            this.cuts = 1;
            limit = this.cutAfter;
          }
        }
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => {
      if (limit !== undefined && sent + chunk.length >= limit) {
        downstream.end(chunk.subarray(0, limit - sent));
        downstream.destroy();
        upstream.destroy();
        return;
      }
      sent += chunk.length;
      downstream.write(chunk);
    });
    const closeBoth = () => {
      downstream.destroy();
      upstream.destroy();
    };
    downstream.on("close", closeBoth).on("error", closeBoth);
    upstream.on("close", closeBoth).on("error", closeBoth);
  }
}

/** Read until the terminal turn-end; run `onParked` at the first turn-end that is not. */
async function readUntilComplete(
  stream: AsyncIterable<ArchmaxEvent<EventData>>,
  onParked?: () => Promise<unknown>,
): Promise<ArchmaxEvent<EventData>[]> {
  const seen: ArchmaxEvent<EventData>[] = [];
  for await (const event of stream) {
    seen.push(event);
    if (kind(event) === "turn-end") {
      if ((event.data as { terminal?: boolean }).terminal) return seen;
      if (onParked) {
        await onParked();
        onParked = undefined;
      }
    }
  }
  throw new Error("the stream ended");
}

describe("sessions", () => {
  test("start parks at the decision, and a decision completes it", async () => {
    const id = freshId();
    const started = session(await client.start("desk", "Please pay out 120 EUR.", { sessionId: id, wait: 30 }));
    assert.equal(started.sessionId, id);
    assert.equal(started.status, "awaiting_decision");
    assert.equal(started.park?.state, "review");
    assert.deepEqual(
      started.park?.transitions?.map((t) => t.to),
      ["paid", "declined"],
    );
    assert.equal((await client.get(id)).status, "awaiting_decision");

    const decided = session(await client.decide(id, "paid", { comment: "Fine by finance.", wait: 30 }));
    assert.equal(decided.status, "completed");
    assert.equal(decided.workflowState, "paid");
    assert.equal(decided.turn?.reply, "Your payout was paid.");
    assert.equal(decided.trail.at(-1)?.decidedBy, "admin");

    const transcript = await client.transcript(id);
    assert.equal(transcript.sessionId, id);
    assert.match(JSON.stringify(transcript.messages), /Your payout was paid\./);
  });

  test("without wait a start is accepted and runs on", async () => {
    const id = freshId();
    const accepted = await client.start("desk", "Pay out 5 EUR.", { sessionId: id });
    assert.equal(accepted.status, "running");
    const stream = client.events(id);
    for await (const event of stream) {
      if (kind(event) === "turn-end") {
        assert.equal((event.data as { status?: string }).status, "awaiting_decision");
        break;
      }
    }
    assert.equal((await client.get(id)).status, "awaiting_decision");
  });

  test("a message to a parked session is a reply-only turn", async () => {
    const id = freshId();
    await client.start("desk", "Pay out 7 EUR.", { sessionId: id, wait: 30 });
    const answered = session(await client.message(id, "Any news?", { wait: 30 }));
    assert.equal(answered.status, "awaiting_decision");
  });

  test("list pages through every session", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await client.start("desk", "Page me.", { wait: 30 })).sessionId);
    const first = await client.list({ workflow: "desk", limit: 2 });
    assert.equal(first.sessions.length, 2);
    assert.ok(first.nextCursor);
    const listed: string[] = [];
    for await (const s of client.listAll({ workflow: "desk", limit: 2 })) listed.push(s.sessionId);
    assert.equal(new Set(listed).size, listed.length, "no session twice across pages");
    for (const id of ids) assert.ok(listed.includes(id), id);
    assert.deepEqual([...listed].sort(), listed, "pages come in id order");
  });

  test("the catalog lists inputs, file inputs and decisions", async () => {
    const catalog = new Map((await client.workflows()).workflows.map((w) => [w.slug, w]));
    assert.deepEqual([...catalog.keys()].sort(), ["desk", "slips"]);
    assert.deepEqual(
      catalog.get("desk")?.humanStates[0]?.transitions.map((t) => t.to),
      ["paid", "declined"],
    );
    const slipSent = catalog.get("slips")?.triggers.find((t) => t.id === "slip_sent");
    assert.deepEqual(slipSent?.fileInputs, ["slip"]);
  });
});

describe("files", () => {
  test("a delivery with a file from disk lands in the session", async () => {
    const id = freshId();
    const waiting = session(await client.start("slips", "I will send the slip.", { sessionId: id, wait: 30 }));
    assert.equal(waiting.status, "awaiting_input");
    const dir = await mkdtemp(join(tmpdir(), "archmax-client-"));
    const path = join(dir, "Packing Slip 2291.TXT");
    await writeFile(path, SLIP);
    const delivered = session(await client.deliver(id, "slip_sent", { files: { slip: await fileFromPath(path) }, wait: 30 }));
    assert.equal(delivered.status, "completed");
    assert.deepEqual(delivered.variables.slip, { value: "scratchpad/inputs/slip.txt", locked: true });
    assert.equal(delivered.turn?.reply, "The slip lists one walnut board.");
    assert.match(JSON.stringify((await client.transcript(id)).messages), /1 x walnut board/);
  });

  test("a start with a file takes it from memory", async () => {
    const id = freshId();
    const started = session(
      await client.start("slips", "Here is the slip.", {
        trigger: "slip_sent",
        sessionId: id,
        files: { slip: { name: "slip-from-memory.txt", data: SLIP, type: "text/plain" } },
        wait: 30,
      }),
    );
    assert.deepEqual(started.variables.slip, { value: "scratchpad/inputs/slip.txt", locked: true });
  });

  test("a file the input does not accept is a typed 400 naming it", async () => {
    const id = freshId();
    await client.start("slips", "I will send the slip.", { sessionId: id, wait: 30 });
    const refused = await client
      .deliver(id, "slip_sent", { files: { slip: new File([SLIP], "slip.pdf") }, wait: 30 })
      .then(() => assert.fail("a .pdf is refused"), (error: unknown) => error);
    assert.ok(refused instanceof InvalidInputError);
    assert.equal(refused.status, 400);
    assert.equal(refused.code, "input.invalid");
    assert.deepEqual(
      refused.fields.map((f) => f.field),
      ["slip"],
    );
  });
});

describe("errors", () => {
  test("each status is its own error class", async () => {
    await assert.rejects(client.get("no-such-session"), (error: unknown) => {
      assert.ok(error instanceof NotFoundError && error instanceof ArchmaxError);
      assert.equal(error.status, 404);
      assert.equal(error.code, "session.unknown");
      assert.match(error.message, /no-such-session/);
      return true;
    });
    await assert.rejects(client.start("no-such-workflow", "Hello."), NotFoundError);
    // A dot segment is refused (a rejection, as every answer), never folded into the route
    // above it (a URL folds even `%2E`).
    for (const dots of [".", ".."]) {
      for (const ask of [() => client.get(dots), () => client.transcript(dots), () => client.start(dots, "Hello.")]) {
        await assert.rejects(ask(), (error: unknown) => {
          assert.ok(error instanceof RangeError, String(error));
          assert.ok(error.message.includes(`\`${dots}\``), error.message);
          return true;
        });
      }
    }
    await assert.rejects(client.list({ limit: 0 }), (error: unknown) => {
      assert.ok(error instanceof InvalidInputError);
      assert.equal(error.status, 400);
      assert.deepEqual(error.fields, [{ field: "limit", problem: "must be a whole number from 1 to 500" }]);
      return true;
    });
    const id = freshId();
    await client.start("desk", "Pay out 3 EUR.", { sessionId: id, wait: 30 });
    await assert.rejects(client.decide(id, "nowhere", { wait: 30 }), InvalidInputError);
    await assert.rejects(client.start("desk", "Again.", { sessionId: id, wait: 30 }), (error: unknown) => {
      assert.ok(error instanceof ConflictError);
      assert.equal(error.status, 409);
      return true;
    });
    const stranger = new ArchmaxClient(baseUrl, { token: "not-the-token-at-all" });
    await assert.rejects(stranger.get(id), (error: unknown) => {
      assert.ok(error instanceof UnauthorizedError && error instanceof AuthError);
      assert.equal(error.status, 401);
      return true;
    });
    await assert.rejects(async () => {
      for await (const _ of client.events("no-such-session")) break;
    }, NotFoundError);
    await assert.rejects(client.start("desk", "x".repeat(1024 * 1024 + 1)), (error: unknown) => {
      assert.ok(error instanceof PayloadTooLargeError);
      assert.deepEqual([error.status, error.code], [413, "request.too-large"]);
      return true;
    });
  });
});

describe("events", () => {
  const proxy = new CuttingProxy(2500);
  before(() => proxy.listen());
  after(() => proxy.close());

  test("a stream cut mid-frame resumes with every event once, in order", async () => {
    const id = freshId();
    await client.start("desk", "Please pay out 40 EUR.", { sessionId: id, wait: 30 });
    const proxied = new ArchmaxClient(proxy.url, { token, retry: { maxRetries: 3, initialDelayMs: 50 } });
    const stream = proxied.events(id);
    const seen = await readUntilComplete(stream, () => client.decide(id, "paid", { wait: 30 }));
    assert.equal(proxy.cuts, 1, "the stream was cut");
    assert.ok(proxy.eventStreams >= 2, "and opened again");
    assert.ok(stream.reconnects >= 1);

    const ids = seen.map((e) => e.id);
    assert.deepEqual(
      ids,
      ids.map((_, i) => (ids[0] ?? 0) + i),
      `every id once, in order: ${ids.join(",")}`,
    );
    // The same session's stream read whole, without a cut, holds exactly these events.
    const whole = await readUntilComplete(client.events(id));
    assert.deepEqual(
      whole.map((e) => [e.id, e.data]),
      seen.map((e) => [e.id, e.data]),
    );
    assert.equal((seen.at(-1)?.data as { status?: string }).status, "completed");
  });

  test("a stream starts after lastEventId", async () => {
    const id = freshId();
    await client.start("desk", "Pay out 1 EUR.", { sessionId: id, wait: 30 });
    const ids: number[] = [];
    for await (const event of client.events(id)) {
      ids.push(event.id);
      if (ids.length === 6) break;
    }
    for await (const event of client.events(id, { lastEventId: ids[4] ?? 0 })) {
      assert.equal(event.id, ids[5]);
      break;
    }
  });

  test("a stream gives up after its retries", async () => {
    const probe = net.createServer();
    await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => probe.close(() => resolve()));
    const nowhere = new ArchmaxClient(`http://127.0.0.1:${port}`, { token, retry: { maxRetries: 2, initialDelayMs: 10 } });
    const stream = nowhere.events("any-session");
    await assert.rejects(async () => {
      for await (const _ of stream) break;
    }, ArchmaxConnectionError);
    assert.equal(stream.reconnects, 2);
  });

  test("close() ends the iteration", async () => {
    const id = freshId();
    await client.start("desk", "Pay out 2 EUR.", { sessionId: id, wait: 30 });
    const stream = client.events(id);
    let count = 0;
    for await (const event of stream) {
      count += 1;
      if (kind(event) === "turn-end") stream.close();
    }
    assert.ok(count >= 1);
  });
});
