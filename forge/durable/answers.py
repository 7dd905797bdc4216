"""Answers to waiting durable runs: what they are (`forge.machine.answers`, re-exported
here, where they were first), and the claim that lets one answer through per question
across every process."""

from __future__ import annotations

from typing import Any

from forge.machine.answers import WAITING_STATES, Answer, AnswerRefused, Waiting

__all__ = ["Answer", "AnswerRefused", "Waiting", "WAITING_STATES", "claim_answer"]


def claim_answer(database: Any, run_id: str, waiting: Waiting) -> None:
    """Claim the right to answer `waiting`, once across every process: two answers sent at
    the same moment (an approve and a reject, two tools) are not both accepted. The claim
    is a row of `forge_claims` keyed by the run and the question, whose unique key decides.

    Raises:
        AnswerRefused: the question has been answered already.
    """
    import os

    token = f"answer-{os.urandom(8).hex()}"
    owner, _ = database.claim(f"answer:{run_id}:{waiting.asked}", "answer", token)
    if owner != token:
        raise AnswerRefused(f"run {run_id!r} has been answered already on that question ({waiting.question}); "
                            "it is no longer waiting for it")
