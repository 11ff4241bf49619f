-- name: take_write
-- One write of caller $1 under $2 writes per minute: 0, or the seconds to wait (migration 067).
SELECT take_write($1, $2);

-- name: hold_stream
-- Stream lease $1 held (or moved) for caller $2 when it holds fewer than $3 others; $4 s to live.
SELECT hold_stream($1, $2, $3, $4);

-- name: release_stream
-- A closed stream's lease, freed for every replica.
SELECT release_stream($1);

-- name: renew_streams
-- This replica's open streams' leases $1 live $2 s more; lapsed leases and idle buckets go.
SELECT renew_streams($1, $2);
