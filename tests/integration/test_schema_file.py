"""persistence/schema.sql is what the migrations produce: regenerated with
`waystation schema --write` whenever a migration is added."""

from __future__ import annotations

import difflib

from waystation.persistence.schema_dump import SCHEMA_FILE, dump_schema
from waystation.registry import load_registry


async def test_schema_file_is_what_the_migrations_produce(database_url: str):
    folders = load_registry(use_entry_points=False).migration_folders()
    produced = await dump_schema(database_url, folders)
    committed = SCHEMA_FILE.read_text()
    diff = "".join(difflib.unified_diff(committed.splitlines(keepends=True),
                                        produced.splitlines(keepends=True),
                                        "persistence/schema.sql", "migrations", n=1))
    assert produced == committed, ("persistence/schema.sql is stale: run `waystation schema "
                                   f"--write`\n{diff[:4000]}")
