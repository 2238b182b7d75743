-- archmax session store, schema version 4: how many rows each record kind holds, so a
-- claim checks a kind's capacity by reading one row instead of counting the kind's
-- records. Every statement that adds or deletes rows of archmax_records changes the
-- kind's row here in the same transaction, under that row's lock.
CREATE TABLE archmax_record_counts (
    kind text COLLATE "C" PRIMARY KEY,
    -- the kind's rows in archmax_records, live or expired and not yet pruned
    records bigint NOT NULL CHECK (records >= 0)
);

INSERT INTO archmax_record_counts (kind, records)
    SELECT kind, count(*) FROM archmax_records GROUP BY kind;
