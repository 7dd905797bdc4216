"""Many stored runs quickly, for tests and benchmarks at scale: copies of one real run's rows
(DBOS's workflow status and events, and forge's note of a parked run), each under a new id
and created a second before the last. Making 100,000 runs one by one would take half an
hour; the readers read the same rows either way."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa


def clone_runs(db: str | Path, template: str, count: int, prefix: str = "clone-") -> list[str]:
    """`count` copies of run `template` in the SQLite database `db`, ids `PREFIX1..PREFIXcount`
    (newest first). Returns the ids."""
    engine = sa.create_engine(f"sqlite:///{db}")
    numbers = f"WITH RECURSIVE numbers(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM numbers WHERE n < {count}) "
    with engine.begin() as connection:
        for table, id_column, created, scale in (("workflow_status", "workflow_uuid", "created_at", 1000),
                                                 ("workflow_events", "workflow_uuid", None, 0),
                                                 ("forge_chain", "run_id", "created_at", 1)):
            columns = [row[1] for row in connection.exec_driver_sql(f"pragma table_info({table})")]
            if not columns:
                continue
            chosen = ", ".join(f'"{c}"' for c in columns)
            made = ", ".join(f"'{prefix}' || n" if c == id_column else f"{created} - n * {scale}" if c == created
                             else f'"{c}"' for c in columns)
            connection.exec_driver_sql(f"{numbers}INSERT INTO {table} ({chosen}) SELECT {made} FROM {table}, numbers "
                                       f"WHERE {id_column} = '{template}'")
    engine.dispose()
    return [f"{prefix}{n}" for n in range(1, count + 1)]
