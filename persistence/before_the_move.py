"""How a database of the release before the kinds owned their tables (issue 40) migrates on.

The kinds' tables were the core's migrations' until then. Those files (`BEFORE_THE_MOVE`:
their numbers and the checksums the databases they reached hold) were then taken out of the
core, or edited down to the core's part, and each kind got one migration creating its tables
as they stood, whose first line names the old files it stands for (`-- replaces: 004 052`).
A database where every one of those files was applied already has that kind's tables: its
migration is recorded as applied there without running, and the old files' rows and
checksums stay as they are and are accepted. Recorded this way rather than with a core
migration that adopts the kinds' tables, because the core no longer knows the kinds' tables,
and a kind not installed must leave none behind on a new database; only a number and a
checksum per old file stay in the core, so nothing of a kind's schema does. A database that
had only some of those files (a release before the one the move followed) is refused: it
migrates with that release first.
"""

from __future__ import annotations

import re

# The core's migration files that created or changed a kind's tables before the kinds owned
# them (issue 40), by number: their names and the checksums the databases they reached hold.
# 005, 010, 022, 027 and 028 were edited down to the core's part; the others left the core.
# A number here is taken for good: only the core's edited file of that name may use it.
BEFORE_THE_MOVE: dict[int, tuple[str, str]] = {
    4: ("batch_jobs", "ccb50331110b21b196d2c5e39a24d8c3608ad9df79ea6b4a9a0bf46f51666a0d"),
    5: ("screen_graph", "828a4572e943c1ab16e8563c585cd1043c652a41e47dda41d5d5caf663e8e8c5"),
    10: ("agents_costs", "e39d2fe8d1012495a585a646db51ed516aa4fedc8dba88de2f169e424ff82237"),
    22: ("row_level_security",
         "b7a7b1cff62c0f5060a0fef548057383651552152292b7b7eccfa18d072abc8e"),
    27: ("mobile_step_function",
         "08be6668a52150819cf24ffd5acf867319d09f4b97ee51a8a02ba649455ab116"),
    28: ("progress_write_function",
         "83a68c750787e2b01ebc396fa256627feff65e2489c2ec1d9a008032acec06e1"),
    30: ("screen_hash_after_the_step",
         "6456cfc04b2a831c1ee62e55025d02bff8e3114639f63627fcf92967e3bdd17b"),
    50: ("mobile_app_package", "c291fa9e747888bb36bc4ece656ae3f4c14ab3eddf6160872bc166c4d091f504"),
    52: ("output_flags", "30eb493cc61631c3f0206b025a5b745631328ea25dcbb4c7b1959f4871b49775"),
    61: ("work_unit_workers", "477d78e68bb67f6fb0dae8cc6b3be211491b94cdfc3d8c94c4c36bbe838c9709"),
    62: ("job_description_metadata",
         "59c453501753c6142e9b6901e20fc0e165087c4d3769bcb26dbc73ac78bb73a0"),
    63: ("worker_unit_totals", "a225fe319bf617aebf7ff65f244285c6e05e321c6fed9786b88f54a7d97fc67e"),
}
# A kind's migration that stands for old core files: its first line names them.
REPLACES = re.compile(r"\A-- replaces:((?: \d{3})+)\r?\n")  # a checkout may convert line ends


class MigrationsTooOld(RuntimeError):
    """The database had only some of the core files a kind's migration stands for."""


def applied_before_the_move(version: int, applied: str | None) -> bool:
    """Whether a `schema_migrations` row is one of the old core files as it was applied."""
    return applied is not None and BEFORE_THE_MOVE.get(version, ("", ""))[1] == applied


def stands_for(version: int, name: str, sql: str, done: set[int]) -> set[int]:
    """The old core files (`BEFORE_THE_MOVE`) that `sql`, a kind's migration, stands for, when
    the database had every one of them (`done`: those applied as they were then; empty: the
    migration is to run); refused when it had only some."""
    found = REPLACES.match(sql)
    if found is None:
        return set()
    replaced = {int(v) for v in found.group(1).split()}
    if unknown := replaced - BEFORE_THE_MOVE.keys():
        raise ValueError(f"migration {version:03d}_{name} replaces {sorted(unknown)}, which "
                         "are no core migrations of before the kinds owned their tables")
    if replaced <= done or not replaced & done:
        return replaced & done
    raise MigrationsTooOld(
        f"migration {version:03d}_{name} stands for the core's migrations "
        f"{', '.join(f'{v:03d}' for v in sorted(replaced))}, and this database had only "
        f"{', '.join(f'{v:03d}' for v in sorted(replaced & done))}: migrate it with the "
        "release before the kinds owned their tables first (Waystation 724ef56)")
