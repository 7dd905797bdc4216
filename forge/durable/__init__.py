"""Durable runs on DBOS (`pip install 'forge-fsm[durable]'`): a run that survives a crash,
waits for a person's answer, and can be taken by any of many workers.

    from forge.durable import Answer

    runs = loop.durable("indexer")                 # runs kept in forge-runs.sqlite
    result = runs.run("index the notes", run_id="index-1")
    if result.status == "waiting":
        result = runs.resume("index-1", Answer.approve(result.waiting.fingerprint))

`StoredRuns(db)` reads and answers the same runs from any process, without the loop's code
(what `forge runs` and `forge ui` use).
"""

from forge.durable.answers import WAITING_STATES, Answer, AnswerRefused, Waiting
from forge.durable.database import DEFAULT_DATABASE, database_url
from forge.durable.durability import Durable, DurableLoop
from forge.durable.host import launch, shutdown
from forge.durable.performer import idempotency_key
from forge.durable.result import DurableResult
from forge.durable.runs import StoredRuns

__all__ = [
    "DEFAULT_DATABASE",
    "WAITING_STATES",
    "Answer",
    "AnswerRefused",
    "Durable",
    "DurableLoop",
    "DurableResult",
    "StoredRuns",
    "Waiting",
    "database_url",
    "idempotency_key",
    "launch",
    "shutdown",
]
