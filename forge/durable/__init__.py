"""Durable runs on DBOS (`pip install 'forge-fsm[durable]'`): a run that survives a crash,
waits for a person's answer, and can be taken by any of many workers.

    from forge.durable import Answer, DurableLoop

    durable = DurableLoop(loop, name="indexer")   # runs kept in forge-runs.sqlite
    result = durable.run("index the notes", run_id="index-1")
    if result.status == "waiting":
        result = durable.resume("index-1", Answer.approve(result.waiting.fingerprint))
"""

from forge.durable.answers import WAITING_STATES, Answer, AnswerRefused, Waiting
from forge.durable.database import DEFAULT_DATABASE, database_url
from forge.durable.loop import DurableLoop, DurableResult, launch, shutdown
from forge.durable.performer import idempotency_key

__all__ = [
    "DEFAULT_DATABASE",
    "WAITING_STATES",
    "Answer",
    "AnswerRefused",
    "DurableLoop",
    "DurableResult",
    "Waiting",
    "database_url",
    "idempotency_key",
    "launch",
    "shutdown",
]
