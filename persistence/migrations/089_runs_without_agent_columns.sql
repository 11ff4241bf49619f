-- `runs` without the two columns migrations 011 and 055 gave it for agent runs, which the
-- agent kind owns now (issue 40; its migration 088 moves them to its own `agent_runs`). With
-- the agent kind installed they are gone already. On a database migrated without it they are
-- dropped here when no row holds a value, so a new core-only database has none; a database
-- whose runs hold values keeps them until the agent kind's migration moves them.
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM information_schema.columns
                    WHERE table_schema = current_schema() AND table_name = 'runs'
                      AND column_name = 'context_summary') THEN
        RETURN;
    END IF;
    -- Planned only once the columns are known to be there.
    IF NOT EXISTS (SELECT 1 FROM runs
                    WHERE context_summary IS NOT NULL OR related_entity_ids IS NOT NULL) THEN
        ALTER TABLE runs DROP COLUMN context_summary, DROP COLUMN related_entity_ids;
    END IF;
END
$$;
