-- Agent runs (issue 12): the short summary an agent re-primes itself from (seed 003's
-- workflows.context_summary), shown on the run; and the edited arguments a decider approved a
-- tool call with, kept beside the decision for the audit.

ALTER TABLE runs ADD COLUMN context_summary text;
ALTER TABLE hitl_requests ADD COLUMN decision_arguments jsonb;
