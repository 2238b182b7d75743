-- archmax session store, schema version 6: session events every runner of a fleet streams.

-- One row per committed event of a root session (its sub-workflows' events count with it),
-- numbered from 1 without gaps. Written with the step commit that follows the event (or
-- when the writer closes); the oldest are pruned past the runner's retention.
CREATE TABLE archmax_events (
    root text COLLATE "C" NOT NULL,
    id bigint NOT NULL CHECK (id > 0),
    body text NOT NULL,
    PRIMARY KEY (root, id)
);

-- The last event id of each root session: the counter commits number their events from,
-- locked by each commit that writes events so the numbers never collide.
CREATE TABLE archmax_event_heads (
    root text COLLATE "C" PRIMARY KEY,
    last bigint NOT NULL CHECK (last >= 0)
);
