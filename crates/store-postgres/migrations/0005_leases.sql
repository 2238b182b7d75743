-- archmax session store, schema version 5: session ownership as a lease on the session's
-- row instead of an advisory lock held on a connection, so a bounded pool (or a pooler in
-- transaction mode) serves any number of open sessions.

-- Fencing tokens: each lease taken draws a new one, never reused even across a session
-- removed and made again, so a runner that lost its lease can never match the row again.
CREATE SEQUENCE archmax_lease_tokens;

-- lease_owner names the runner holding the session (NULL: nobody); lease_expires is when
-- the lease runs out unless renewed (database clock); lease_token is the holder's fence.
-- claimed_until keeps other runners off a session one runner took to wake or resume, for
-- a short while, so a fleet hands each such session to one runner.
ALTER TABLE archmax_sessions
    ADD COLUMN lease_owner text,
    ADD COLUMN lease_token bigint NOT NULL DEFAULT 0,
    ADD COLUMN lease_expires timestamptz,
    ADD COLUMN claimed_until timestamptz;
