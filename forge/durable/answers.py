"""Answers to waiting durable runs: what they are (`forge.records.answers`, re-exported
here, where they were first), and the claim that lets one answer through per question
across every process."""

from __future__ import annotations

from typing import Any

from forge.records.answers import WAITING_STATES, Answer, AnswerRefused, Waiting, json_text, read_answer

__all__ = ["CANCELLED", "Answer", "AnswerRefused", "Waiting", "WAITING_STATES", "claim_answer", "json_text", "read_answer"]


CANCELLED = "CANCELLED"
"""What `forge_answers` holds for the question a run waited on when it was cancelled."""


def claim_answer(database: Any, run_id: str, waiting: Waiting, answer: Answer | None) -> None:
    """Claim the right to answer `waiting`, once across every process, and store `answer`
    (its JSON; None: the run is cancelled as it waits, `CANCELLED`) as the answer to that
    question: two answers sent at the same moment (an approve and a reject, two tools) are
    not both accepted. The claim is a row of `forge_answers` keyed by the run and the
    question, whose unique key decides; the run takes its answer from there.

    Raises:
        AnswerRefused: the question has been answered already (or its deadline passed, or
            the run was cancelled).
    """
    import json

    text = None if answer is None else json.dumps(answer.to_json(), separators=(",", ":"))
    if not database.answer(run_id, waiting.asked, text if text is not None else CANCELLED):
        raise AnswerRefused(f"run {run_id!r} has been answered already on that question ({waiting.asks}); "
                            "it is no longer waiting for it")
