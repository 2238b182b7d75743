/** Typed errors from the API's error answers (`{"error": {"code", "message", "details"}}`). */

import type { components } from "./schema.js";

/** What went wrong, beyond the code: a 400 lists every offending field in `fields`. */
export type ErrorDetails = components["schemas"]["ErrorDetails"] & Record<string, unknown>;

/**
 * An error answer from `archmax serve`: `status` is the HTTP status, `code` the API's stable
 * id (such as `session.busy` or `input.invalid`), `message` the sentence a person reads,
 * `details` the rest.
 */
export class ArchmaxError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: ErrorDetails;
  /** The answer's Retry-After, in seconds, when it had one (429, 503, a busy 409). */
  readonly retryAfter: number | undefined;

  constructor(status: number, code: string, message: string, details: ErrorDetails = {}, retryAfter?: number) {
    super(message);
    this.name = new.target.name;
    this.status = status;
    this.code = code;
    this.details = details;
    this.retryAfter = retryAfter;
  }

  /** The offending fields of a 400 (`details.fields`), or an empty list. */
  get fields(): { field: string; problem: string }[] {
    return Array.isArray(this.details.fields) ? this.details.fields : [];
  }
}

/** 400: a field, a query parameter or the body does not hold. */
export class InvalidInputError extends ArchmaxError {}
/** 401 or 403: no valid token, or the token lacks the scope. */
export class AuthError extends ArchmaxError {}
/** 401: no valid bearer token (or a bad webhook signature). */
export class UnauthorizedError extends AuthError {}
/** 403: the token lacks the scope, or the request is refused (a decider who is not an approver). */
export class ForbiddenError extends AuthError {}
/** 404: no such session, workflow or trigger. */
export class NotFoundError extends ArchmaxError {}
/** 409: the session is busy with a turn, exists already, or is not parked where the request needs it. */
export class ConflictError extends ArchmaxError {}
/** 413: the body, or an upload, is over the server's limit. */
export class PayloadTooLargeError extends ArchmaxError {}
/** 429: the server is saturated; `retryAfter` holds its Retry-After in seconds, when given. */
export class RateLimitedError extends ArchmaxError {}
/** 5xx: the store failed, a turn ended without an answer, or the server is shutting down (503). */
export class ServerError extends ArchmaxError {}
/** No answer at all: the connection failed, or an event stream ran out of retries (status 0). */
export class ArchmaxConnectionError extends ArchmaxError {
  constructor(message: string, cause?: unknown) {
    super(0, "connection", message);
    if (cause !== undefined) (this as { cause?: unknown }).cause = cause;
  }
}

function retryAfterOf(response: Response): number | undefined {
  const value = response.headers.get("retry-after");
  if (value === null) return undefined;
  const seconds = Number(value);
  return Number.isFinite(seconds) ? seconds : undefined;
}

/** The typed error for a non-2xx answer; reads its body. */
export async function errorFromResponse(response: Response): Promise<ArchmaxError> {
  const status = response.status;
  let code = `http.${status}`;
  let message = response.statusText || `HTTP ${status}`;
  let details: ErrorDetails = {};
  const text = await response.text().catch(() => "");
  try {
    const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown; details?: unknown } };
    if (body && typeof body.error === "object" && body.error !== null) {
      if (typeof body.error.code === "string") code = body.error.code;
      if (typeof body.error.message === "string") message = body.error.message;
      if (typeof body.error.details === "object" && body.error.details !== null) {
        details = body.error.details as ErrorDetails;
      }
    }
  } catch {
    // Not JSON (a proxy's page, say): keep the status line.
  }
  const retryAfter = retryAfterOf(response);
  const Kind =
    status === 400
      ? InvalidInputError
      : status === 401
        ? UnauthorizedError
        : status === 403
          ? ForbiddenError
          : status === 404
            ? NotFoundError
            : status === 409
              ? ConflictError
              : status === 413
                ? PayloadTooLargeError
                : status === 429
                  ? RateLimitedError
                  : status >= 500
                    ? ServerError
                    : ArchmaxError;
  return new Kind(status, code, message, details, retryAfter);
}
