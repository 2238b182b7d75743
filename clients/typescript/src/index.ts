/**
 * `@archmax/client`: a client for archmax serve's HTTP API. Start sessions, continue them,
 * decide and deliver (with files for `type: file` inputs), read sessions, transcripts and
 * the workflow catalog, page through sessions, and stream a session's events with automatic
 * `Last-Event-ID` resume. Error answers reject with `ArchmaxError` subclasses.
 */

export {
  ArchmaxClient,
  EventStream,
  fileFromPath,
  isSession,
  type Accepted,
  type ClientOptions,
  type DecideOptions,
  type DeliverOptions,
  type EventData,
  type EventsOptions,
  type FileInput,
  type ListQuery,
  type RetryOptions,
  type Park,
  type Session,
  type TrailEntry,
  type Turn,
  type Variable,
  type SessionPage,
  type SessionStatus,
  type StartOptions,
  type Transcript,
  type TurnAnswer,
  type WorkflowEntry,
  type WorkflowList,
} from "./client.js";
export {
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
  errorFromResponse,
  type ErrorDetails,
} from "./errors.js";
export { parseSse, type ArchmaxEvent } from "./sse.js";
export type { components, operations, paths } from "./schema.js";
