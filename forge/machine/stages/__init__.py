"""The built-in stages: the machine's actions and guards, one module per stage (ten:
select, call one tool, call several together, record, request approval, verify and decide,
the loop's guardrails on the input, on a call or answer and on a result, and a wrap-up call
before a budget ends a run; beside them `fingerprint`,
the request fingerprint the calls are keyed by), made of the seven stage contracts of
`forge.agent`.

Each stage module defines its action, written once as a generator of effects
(`forge.records.effects`) that runs unchanged under `run()` and `arun()`; its verdicts (a
`StrEnum`); its `SPEC` (the `ActionSpec`: the action, its verdicts, its abstract model for
`forge check`, what it needs from earlier stages) and its `GUARDS`. An action reads the run
and returns a `StageOutcome`: its verdict, the facts it produced and what the trace keeps;
the engine folds that into the run. Actions never raise for anything a tool, the policy or
`verify` does: each such failure becomes a verdict (and the run's error when it ends the
run). What does raise (a bug in a stage, an approver or user stage that fails, an observer)
is the engine's to turn into `fatal_error`. Adding a built-in stage is one module here, its
entry in `STAGES`, and the TOML that names it.
"""

from __future__ import annotations

from collections.abc import Mapping

from forge.machine.catalog import ActionSpec, GuardSpec, StageCatalog
from forge.machine.stages import (
    call_tool,
    call_tools,
    check_call,
    check_input,
    check_result,
    record_observation,
    request_approval,
    select_tool,
    verify_and_decide,
    wrap_up,
)
from forge.machine.stages.call_tool import CallOutcome
from forge.machine.stages.fingerprint import NotFingerprintable, request_fingerprint
from forge.machine.stages.record_observation import Recording
from forge.machine.stages.request_approval import Approval, ApprovalRejected, ApprovalRequest, ApprovalTimedOut
from forge.machine.stages.select_tool import Selection
from forge.machine.stages.verify_and_decide import Verification
from forge.records.trace import ERROR_TEXT_LIMIT, error_text

__all__ = ["ACTIONS", "BUILTIN_STAGES", "ERROR_TEXT_LIMIT", "GUARDS", "Approval", "ApprovalRejected", "ApprovalRequest",
           "ApprovalTimedOut",
           "CallOutcome", "NotFingerprintable", "Recording", "Selection", "Verification", "error_text",
           "request_fingerprint"]

STAGES = (select_tool, call_tool, call_tools, request_approval, check_input, check_call, check_result,
          record_observation, verify_and_decide, wrap_up)

ACTIONS: Mapping[str, ActionSpec] = {stage.SPEC.name: stage.SPEC for stage in STAGES}
GUARDS: Mapping[str, GuardSpec] = {guard.name: guard for stage in STAGES for guard in stage.GUARDS}
BUILTIN_STAGES = StageCatalog(ACTIONS, GUARDS)
