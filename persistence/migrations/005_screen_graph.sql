-- The artifacts a run's steps saw (screenshots, hierarchies: seed 001's mobile steps), by
-- content address in the worker's artifact store, which the retention sweep empties of
-- files no remaining run saw. Edited when the kinds came to own their tables (issue 40):
-- the screen graph this file created then is the mobile kind's own migration.

CREATE TABLE run_artifacts (
    run_id        uuid NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    step          int NOT NULL,
    kind          text NOT NULL CHECK (kind IN ('screenshot', 'hierarchy')),
    sha256        text NOT NULL,     -- content address in the artifact store
    content_type  text NOT NULL,
    size_bytes    int NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (run_id, step, kind)
);
CREATE INDEX idx_run_artifacts_sha ON run_artifacts (sha256);
