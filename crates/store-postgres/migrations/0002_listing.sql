-- archmax session store, schema version 2: listing sessions a page at a time.

-- Session ids sort by their bytes, as the runtime compares strings, whatever collation the
-- database has: a page's cursor means the same here as in every other store, and the
-- primary key serves `id > cursor ORDER BY id`.
ALTER TABLE archmax_sessions ALTER COLUMN id TYPE text COLLATE "C";

-- The resume time as an instant, so "due" is a time comparison: resume_at keeps the text
-- the session holds, which may carry an offset or a fraction of a second. NULL when the
-- session waits for no time or the text is not an RFC 3339 instant (never due).
ALTER TABLE archmax_sessions ADD COLUMN resume_due timestamptz;

DO $$
DECLARE
    waiting record;
BEGIN
    FOR waiting IN
        SELECT id, resume_at FROM archmax_sessions
        WHERE resume_at ~ '^\s*\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\s*$'
    LOOP
        BEGIN
            UPDATE archmax_sessions SET resume_due = date_trunc('milliseconds', trim(waiting.resume_at)::timestamptz)
            WHERE id = waiting.id;
        EXCEPTION WHEN OTHERS THEN
            -- Shaped like an instant but not one PostgreSQL takes (a 30th of February, an
            -- offset past ±15:59): never due, and never a reason for the upgrade to fail.
            NULL;
        END;
    END LOOP;
END
$$;

DROP INDEX archmax_sessions_due;
CREATE INDEX archmax_sessions_due ON archmax_sessions (resume_due) WHERE resume_due IS NOT NULL;

-- Pages of one workflow's sessions, and of one status's (or the parked ones').
CREATE INDEX archmax_sessions_by_workflow ON archmax_sessions (workflow, id);
CREATE INDEX archmax_sessions_by_status ON archmax_sessions (status, id);
