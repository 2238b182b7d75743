-- archmax session store, schema version 1.
-- One row per session: its small head (rewritten by every step) and a compacted snapshot.
CREATE TABLE archmax_sessions (
    id text PRIMARY KEY,
    -- The last committed step; a commit moves it from seq - 1 to seq or writes nothing.
    seq bigint NOT NULL CHECK (seq >= 0),
    status text NOT NULL,
    workflow text NOT NULL,
    spec_hash text NOT NULL,
    parent text,
    -- RFC 3339, set while the session waits with a resume time.
    resume_at text,
    head jsonb NOT NULL,
    -- The whole state (JSON) folded through snapshot_seq; the steps after it complete it.
    snapshot_seq bigint NOT NULL,
    snapshot bytea NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL
);

-- Sessions due at resumeAt.
CREATE INDEX archmax_sessions_due ON archmax_sessions (resume_at) WHERE resume_at IS NOT NULL;

-- Append-only: one row per committed step; the key refuses a second step of one seq.
CREATE TABLE archmax_steps (
    session_id text NOT NULL REFERENCES archmax_sessions (id) ON DELETE CASCADE,
    seq bigint NOT NULL CHECK (seq > 0),
    delta bytea NOT NULL,
    PRIMARY KEY (session_id, seq)
);

-- A session's own files (scratchpad/, artifacts/, the offload zones). No foreign key:
-- a sub-workflow's seed files are written before its session row exists.
CREATE TABLE archmax_files (
    session_id text NOT NULL,
    path text NOT NULL,
    size bigint NOT NULL CHECK (size >= 0),
    content bytea NOT NULL,
    PRIMARY KEY (session_id, path)
);

-- The workflow programs sessions are pinned to, by spec hash; never removed.
CREATE TABLE archmax_programs (
    spec_hash text PRIMARY KEY,
    spec jsonb NOT NULL
);
