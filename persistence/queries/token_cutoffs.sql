-- name: cut_off_tokens
-- Every token of the user with name hash $1 issued until now stops working; the latest
-- cut-off counts.
INSERT INTO token_cutoffs (subject_hash, not_before) VALUES ($1, now())
ON CONFLICT (subject_hash) DO UPDATE SET not_before = EXCLUDED.not_before;

-- name: token_not_before
-- Tokens of the user with name hash $1 issued before this time no longer count.
SELECT not_before FROM token_cutoffs WHERE subject_hash = $1;
