/** `ArchmaxClient`: every operation of `archmax serve`'s HTTP API, over `fetch`. */

import type { components, operations } from "./schema.js";
import { ArchmaxConnectionError, ArchmaxError, RateLimitedError, ServerError, errorFromResponse } from "./errors.js";
import { parseSse, type ArchmaxEvent } from "./sse.js";

type Schemas = components["schemas"];
/**
 * Where a parked session waits. The OpenAPI document types `park` as a bare object, so
 * this shape is written here from the API guide (docs/src/guides/serving.md).
 */
export interface Park {
  /** `decision` (a human state) or `input` (waiting for a delivery). */
  channel: "decision" | "input";
  state: string;
  since?: string;
  /** A decision's choices: `to` is what `decide` takes. */
  transitions?: { to: string; description?: string; type?: string }[];
  approvers?: string[];
  instructions?: string | null;
  title?: string | null;
  /** An input park's reason and when it is due. */
  reason?: string | null;
  resumeAt?: string | null;
  [key: string]: unknown;
}
/** One step of a session's trail (bare objects in the OpenAPI document; shape from the guide). */
export interface TrailEntry {
  to: string;
  kind: string;
  reason?: string | null;
  decidedBy?: string;
  [key: string]: unknown;
}
/** How a waited-for turn ended (a bare object in the OpenAPI document). */
export interface Turn {
  disposition: string;
  reply?: string | null;
  reason?: string | null;
  [key: string]: unknown;
}
/** A session variable's value and whether it is locked. */
export interface Variable {
  value: unknown;
  locked: boolean;
}
/** A session as the API answers it (the `archmax sessions ID --json` shape, with `park`). */
export type Session = Omit<Schemas["Session"], "park" | "trail" | "turn" | "variables"> & {
  park?: Park | null;
  trail: TrailEntry[];
  turn?: Turn;
  variables: Record<string, Variable>;
};
/** 202: the turn was accepted and runs on. */
export type Accepted = Schemas["Accepted"];
/** One page of `GET /v1/sessions`. */
export type SessionPage = Omit<Schemas["SessionPage"], "sessions"> & { sessions: Session[] };
/** A session's messages. */
export type Transcript = Schemas["Transcript"];
/** `GET /v1/workflows`: the catalog. */
export type WorkflowList = Schemas["WorkflowList"];
/** One served workflow of the catalog. */
export type WorkflowEntry = Schemas["WorkflowEntry"];
/** A session's lifecycle status. */
export type SessionStatus = Schemas["SessionStatus"];
/** The query of `GET /v1/sessions`. */
export type ListQuery = NonNullable<operations["list"]["parameters"]["query"]>;
/** One event of a session's stream (the union `schemas/events.schema.json` defines). */
export type EventData = Schemas["Event"];

/**
 * A file for a `type: file` input: a `File` (its name is sent), a `Blob` (sent under the
 * input's name, which has no ending an `accept` list would take), or `{ name, data, type? }`.
 * The server checks the file name's ending against the input's `accept`. In Node,
 * `fileFromPath` reads one from disk.
 */
export type FileInput = Blob | { name: string; data: Blob | ArrayBuffer | Uint8Array | string; type?: string };

/** How an event stream reconnects: attempts in a row (the count starts again once a frame
 * arrives), the first delay and the longest, in milliseconds (doubled each time, 20% jitter). */
export interface RetryOptions {
  maxRetries?: number;
  initialDelayMs?: number;
  maxDelayMs?: number;
}

export interface ClientOptions {
  /** The token (`ARCHMAX_SERVE_TOKEN`, or one of `--tokens`); none for a server without auth. */
  token?: string;
  /** How long a request may take, in milliseconds, on top of its `wait` (default 30 000). */
  timeoutMs?: number;
  /** The event streams' reconnects (default 5 retries, 250 ms doubling up to 5 s). */
  retry?: RetryOptions;
  /** The `fetch` to use (default: the global one). */
  fetch?: typeof fetch;
}

export interface StartOptions {
  /** The trigger that starts it (default `manual`). */
  trigger?: string;
  variables?: Record<string, unknown>;
  sessionId?: string;
  /** Files for the trigger's `type: file` inputs, by input name: sent as `multipart/form-data`. */
  files?: Record<string, FileInput>;
  /** Seconds to wait for the turn's outcome (at most 300); without it the answer is `Accepted`. */
  wait?: number;
}

export interface DeliverOptions {
  variables?: Record<string, unknown>;
  message?: string;
  files?: Record<string, FileInput>;
  /** The workflow the session must belong to (another workflow's session is a 404). */
  workflow?: string;
  undeclared?: boolean;
  raiseBudget?: boolean;
  wait?: number;
}

export interface DecideOptions {
  comment?: string;
  raiseBudget?: boolean;
  wait?: number;
}

export interface EventsOptions {
  /** Start after this event id (as a resume would). */
  lastEventId?: number;
  retry?: RetryOptions;
  /** Reconnect when nothing (not even a keep-alive comment) arrives for this long (default 60 000 ms). */
  idleTimeoutMs?: number;
  /** Stops the stream (the iteration ends). */
  signal?: AbortSignal;
}

/** With `wait`, the session as it stands after the turn; without, `Accepted`. */
export type TurnAnswer = Session | Accepted;

/** Whether a turn's answer is the session (the turn ended within `wait`), not `Accepted`. */
export function isSession(answer: TurnAnswer): answer is Session {
  return "workflowState" in answer;
}

const USER_AGENT = "archmax-client-typescript/0.1.0";

function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    }
    signal?.addEventListener("abort", done, { once: true });
  });
}

/**
 * `value` as one path segment. `.` and `..` cannot be one: a URL folds them, even spelled
 * `%2E`, into the route above (`/v1/sessions/.` would ask for the session list), and no
 * session or workflow is named so; they are refused here (the methods that take an id are
 * `async`, so the refusal is a rejection).
 */
function segment(value: string): string {
  if (value === "." || value === "..") {
    throw new RangeError(`\`${value}\` names no session or workflow: a URL folds it into the route above`);
  }
  return encodeURIComponent(value);
}

function query(values: Record<string, string | number | boolean | undefined | null>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(values)) {
    if (value !== undefined && value !== null) params.set(key, String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

function defined<T extends Record<string, unknown>>(values: T): Partial<T> {
  return Object.fromEntries(Object.entries(values).filter(([, value]) => value !== undefined)) as Partial<T>;
}

function filePart(name: string, value: FileInput): [Blob, string] {
  if (value instanceof Blob) {
    const fileName = typeof (value as File).name === "string" && (value as File).name ? (value as File).name : name;
    return [value, fileName];
  }
  const data = value.data;
  const blob =
    data instanceof Blob
      ? data
      : new Blob([data as BlobPart], { type: value.type ?? "application/octet-stream" });
  return [blob, value.name];
}

/** A file from disk, for `files` (Node only). */
export async function fileFromPath(path: string, name?: string): Promise<File> {
  const { openAsBlob } = await import("node:fs");
  const { basename } = await import("node:path");
  const blob = await openAsBlob(path);
  return new File([blob], name ?? basename(path), { type: "application/octet-stream" });
}

/**
 * A client for `archmax serve`.
 *
 * ```ts
 * const archmax = new ArchmaxClient("http://127.0.0.1:8787", { token: process.env.ARCHMAX_TOKEN });
 * const session = await archmax.start("refund-desk", "Refund ORD-1042, please.", { wait: 30 });
 * if (session.status === "awaiting_decision") await archmax.decide(session.sessionId, "approve", { wait: 30 });
 * ```
 *
 * Every method resolves to the API's JSON (typed from its OpenAPI document) and rejects
 * with an `ArchmaxError` subclass for an error answer.
 */
export class ArchmaxClient {
  readonly baseUrl: string;
  private readonly token: string | undefined;
  private readonly timeoutMs: number;
  private readonly retry: Required<RetryOptions>;
  private readonly fetch: typeof fetch;

  constructor(baseUrl: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.retry = { maxRetries: 5, initialDelayMs: 250, maxDelayMs: 5_000, ...options.retry };
    this.fetch = options.fetch ?? globalThis.fetch.bind(globalThis);
  }

  private headers(accept = "application/json"): Record<string, string> {
    const headers: Record<string, string> = { accept, "user-agent": USER_AGENT };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    return headers;
  }

  private async send<T>(
    method: string,
    path: string,
    options: { body?: unknown; files?: Record<string, FileInput>; wait?: number | undefined } = {},
  ): Promise<T> {
    const headers = this.headers();
    let body: BodyInit | undefined;
    if (options.files && Object.keys(options.files).length > 0) {
      const form = new FormData();
      form.append("request", new Blob([JSON.stringify(options.body ?? {})], { type: "application/json" }), "request.json");
      for (const [name, value] of Object.entries(options.files)) {
        if (name === "request") throw new TypeError("a file input cannot be named `request`: that part holds the JSON body");
        const [blob, fileName] = filePart(name, value);
        form.append(name, blob, fileName);
      }
      body = form;
    } else if (options.body !== undefined) {
      headers["content-type"] = "application/json";
      body = JSON.stringify(options.body);
    }
    const timeout = this.timeoutMs + (options.wait ?? 0) * 1000;
    let response: Response;
    try {
      response = await this.fetch(this.baseUrl + path, {
        method,
        headers,
        body: body ?? null,
        signal: AbortSignal.timeout(timeout),
      });
    } catch (error) {
      throw new ArchmaxConnectionError(`${method} ${path}: ${String(error)}`, error);
    }
    if (!response.ok) throw await errorFromResponse(response);
    const text = await response.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** Start a session of `workflow`; with `files`, a multipart upload. */
  async start(workflow: string, message: string, options: StartOptions = {}): Promise<TurnAnswer> {
    const body = defined({
      message,
      trigger: options.trigger,
      variables: options.variables,
      sessionId: options.sessionId,
    });
    return this.send(`POST`, `/v1/workflows/${segment(workflow)}/sessions${query({ wait: options.wait })}`, {
      body,
      files: options.files,
      wait: options.wait,
    });
  }

  /** Continue a session (a reply-only turn when it is parked at a decision). */
  async message(sessionId: string, message: string, options: { wait?: number } = {}): Promise<TurnAnswer> {
    return this.send("POST", `/v1/sessions/${segment(sessionId)}/messages${query({ wait: options.wait })}`, {
      body: { message },
      wait: options.wait,
    });
  }

  /** Decide a session parked at a human state: `to` is one of its `park.transitions`. */
  async decide(sessionId: string, to: string, options: DecideOptions = {}): Promise<TurnAnswer> {
    const body = defined({ to, comment: options.comment, raiseBudget: options.raiseBudget });
    return this.send("POST", `/v1/sessions/${segment(sessionId)}/decide${query({ wait: options.wait })}`, {
      body,
      wait: options.wait,
    });
  }

  /** Deliver a trigger to a session waiting for input; `files` as for `start`. */
  async deliver(sessionId: string, trigger: string, options: DeliverOptions = {}): Promise<TurnAnswer> {
    const body = defined({
      trigger,
      variables: options.variables,
      message: options.message,
      workflow: options.workflow,
      undeclared: options.undeclared,
      raiseBudget: options.raiseBudget,
    });
    return this.send("POST", `/v1/sessions/${segment(sessionId)}/deliver${query({ wait: options.wait })}`, {
      body,
      files: options.files,
      wait: options.wait,
    });
  }

  /** One session, with its park record. */
  async get(sessionId: string): Promise<Session> {
    return this.send("GET", `/v1/sessions/${segment(sessionId)}`);
  }

  /** A session's messages. */
  async transcript(sessionId: string): Promise<Transcript> {
    return this.send("GET", `/v1/sessions/${segment(sessionId)}/transcript`);
  }

  /** One page of sessions; pass its `nextCursor` as `cursor` for the next. */
  list(options: ListQuery = {}): Promise<SessionPage> {
    return this.send("GET", `/v1/sessions${query(options)}`);
  }

  /** Every session the filters select, page after page (following `nextCursor`). */
  async *listAll(options: Omit<ListQuery, "cursor"> = {}): AsyncGenerator<Session> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.list({ ...options, ...(cursor ? { cursor } : {}) });
      yield* page.sessions;
      if (!page.nextCursor) return;
      cursor = page.nextCursor;
    }
  }

  /** The catalog: every served workflow, its triggers' inputs (JSON Schema, `fileInputs`)
   * and its human states' transitions. */
  workflows(): Promise<WorkflowList> {
    return this.send("GET", "/v1/workflows");
  }

  /** The server's OpenAPI 3.1 document. */
  openapi(): Promise<Record<string, unknown>> {
    return this.send("GET", "/v1/openapi.json");
  }

  /**
   * The session's events, live, as an async iterator (endless: `break`, `close()` or abort
   * `signal`). A disconnect reconnects with `Last-Event-ID`, so every event arrives once and
   * in order; after `retry.maxRetries` failed attempts in a row it rejects with
   * `ArchmaxConnectionError`. An error answer (404, 401, …) rejects at once.
   */
  events(sessionId: string, options: EventsOptions = {}): EventStream {
    return new EventStream(this, `/v1/sessions/${segment(sessionId)}/events`, options, {
      retry: { ...this.retry, ...options.retry },
      fetch: this.fetch,
      headers: (last) => {
        const headers = this.headers("text/event-stream");
        if (last !== undefined) headers["last-event-id"] = String(last);
        return headers;
      },
    });
  }
}

interface StreamParts {
  retry: Required<RetryOptions>;
  fetch: typeof fetch;
  headers: (lastEventId: number | undefined) => Record<string, string>;
}

/** A session's event stream that resumes after a disconnect. */
export class EventStream implements AsyncIterable<ArchmaxEvent<EventData>> {
  /** The id of the last frame received: where a reconnect resumes. */
  lastEventId: number | undefined;
  /** How often the stream reconnected. */
  reconnects = 0;
  private closed = false;
  private current: AbortController | undefined;
  private readonly url: string;

  constructor(
    client: ArchmaxClient,
    private readonly path: string,
    private readonly options: EventsOptions,
    private readonly parts: StreamParts,
  ) {
    this.url = client.baseUrl + path;
    this.lastEventId = options.lastEventId;
    options.signal?.addEventListener("abort", () => this.close(), { once: true });
  }

  /** Stop: the iteration ends and the connection is closed. */
  close(): void {
    this.closed = true;
    this.current?.abort();
  }

  [Symbol.asyncIterator](): AsyncGenerator<ArchmaxEvent<EventData>> {
    return this.run();
  }

  private async *run(): AsyncGenerator<ArchmaxEvent<EventData>> {
    const { retry } = this.parts;
    const idleMs = this.options.idleTimeoutMs ?? 60_000;
    let failures = 0;
    try {
      while (!this.closed && !this.options.signal?.aborted) {
        const controller = new AbortController();
        this.current = controller;
        let idle: ReturnType<typeof setTimeout> | undefined;
        const arm = () => {
          clearTimeout(idle);
          idle = setTimeout(() => controller.abort(new Error(`no data for ${idleMs} ms`)), idleMs);
        };
        let problem: unknown;
        try {
          arm();
          const response = await this.parts.fetch(this.url, {
            headers: this.parts.headers(this.lastEventId),
            signal: controller.signal,
          });
          if (!response.ok) {
            const error = await errorFromResponse(response);
            if (!(error instanceof ServerError || error instanceof RateLimitedError)) throw error;
            problem = error;
          } else if (response.body) {
            const body = response.body.pipeThrough(
              new TransformStream<Uint8Array, Uint8Array>({
                transform(chunk, sink) {
                  arm();
                  sink.enqueue(chunk);
                },
              }),
            );
            for await (const frame of parseSse(body)) {
              failures = 0;
              this.lastEventId = frame.id;
              yield frame as ArchmaxEvent<EventData>;
            }
          }
        } catch (error) {
          if (error instanceof ArchmaxError && !(error instanceof ServerError || error instanceof RateLimitedError)) {
            throw error;
          }
          problem = error;
        } finally {
          clearTimeout(idle);
        }
        if (this.closed || this.options.signal?.aborted) return;
        failures += 1;
        if (failures > retry.maxRetries) {
          throw new ArchmaxConnectionError(
            `the event stream of ${this.path} stopped after ${retry.maxRetries} reconnects: ${String(problem)}`,
            problem,
          );
        }
        this.reconnects += 1;
        let delay = Math.min(retry.maxDelayMs, retry.initialDelayMs * 2 ** (failures - 1)) * (1 + Math.random() * 0.2);
        if (problem instanceof ArchmaxError && problem.retryAfter) delay = Math.max(delay, problem.retryAfter * 1000);
        await sleep(delay, this.options.signal);
      }
    } finally {
      this.current?.abort();
    }
  }
}
