-- archmax session store, schema version 3: small expiring records every runner shares
-- (accepted webhook signatures, inbox sign-ins). One row per kind and key; a row whose
-- expires_ms has passed is dead and is replaced by the next claim of its key or pruned.
CREATE TABLE archmax_records (
    kind text COLLATE "C" NOT NULL,
    key text COLLATE "C" NOT NULL,
    value bytea NOT NULL,
    -- milliseconds since the epoch, as the claiming runner's clock told them
    expires_ms bigint NOT NULL,
    PRIMARY KEY (kind, key)
);

-- Pruning and counting a kind's live records.
CREATE INDEX archmax_records_expiry ON archmax_records (kind, expires_ms);
