-- Erasure of one user's personal rows beyond their runs (issue 15).
--
-- A request is kept here until the retention sweep has carried it out after the grace
-- period; then the row goes too, so the name is nowhere. The pseudonym replaces the name
-- where a row belongs to someone else's record (a decision on another's run, a group's
-- webhook): one per erased person, so votes of two erased people still count as two.
CREATE TABLE user_erasures (
    user_name     text PRIMARY KEY,
    pseudonym     text NOT NULL UNIQUE,
    requested_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX idx_user_erasures_requested_at ON user_erasures (requested_at);
