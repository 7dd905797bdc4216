"""machines/approval.toml: side-effecting calls wait for an approver."""

import subprocess
import sys

import pytest
from builders import Recorder, intent, scripted_loop, tool

from forge import ApprovalRejected, ApprovalRequest
from forge.machine.stages import request_fingerprint


def _loop(approver, intents, verify=lambda o: o.tool_name == "write", **options):
    write = tool("write", {"write"}, required={"path"}, side_effect=True)
    return scripted_loop([tool("read"), write], intents, verify=verify, definition="approval",
                         approver=approver, **options)


def test_an_approved_call_runs_and_the_approver_saw_exactly_that_call():
    asked: list[ApprovalRequest] = []

    def approver(request):
        asked.append(request)
        return True

    result = _loop(approver, [intent("write", path="x.md")]).run("write x")
    assert result.reason == "verified_success"
    assert [(r.source, r.trigger, r.dest) for r in result.trace[:3]] == [
        ("select", "choose", "approve"), ("approve", "approve", "execute"), ("execute", "call", "observe")]
    (request,) = asked
    assert (request.tool, dict(request.arguments), request.step) == ("write", {"path": "x.md"}, 1)
    assert request.fingerprint == request_fingerprint("write", {"path": "x.md"})


def test_tools_without_side_effects_need_no_approval():
    approver = Recorder()
    result = _loop(approver, [intent("read")], verify=lambda o: True).run("read")
    assert result.reason == "verified_success" and approver.calls == []
    assert result.trace[1].trigger == "pass" and result.trace[1].detail["approval"] == "not needed"


def test_a_rejected_call_is_a_retryable_observation_and_the_policy_replans():
    answers = iter([False, True])
    handler = Recorder("written")
    write = tool("write", {"write"}, handler=handler, required={"path"}, side_effect=True)
    loop = scripted_loop([write], [intent("write", path="a"), intent("write", path="b")],
                         verify=lambda o: o.status == "ok", definition="approval", approver=lambda r: next(answers))
    result = loop.run("write")
    first, second = result.state.observations
    assert first.status == "retryable_error" and isinstance(first.payload, ApprovalRejected)
    assert first.payload.request.arguments == {"path": "a"}
    assert second.status == "ok"
    assert handler.calls == [{"path": "b"}]  # the rejected call never reached the handler
    assert result.reason == "verified_success"
    assert ("approve", "reject", "observe") in [(r.source, r.trigger, r.dest) for r in result.trace]


def test_no_answer_ends_the_run_waiting_for_approval():
    result = _loop(lambda request: None, [intent("write", path="x")]).run("write")
    assert (result.reason, result.outcome) == ("approval_required", "needs_input")
    assert result.state.observations == []


def test_an_approver_answering_something_else_fails_the_run_clearly():
    result = _loop(lambda request: "yes", [intent("write", path="x")]).run("write")
    assert result.reason == "fatal_error"
    assert "must return True, False or None" in str(result.error)


def test_the_approval_definition_needs_an_approver():
    with pytest.raises(ValueError, match="asks for approvals.*approver="):
        scripted_loop([tool("a")], [intent("a")], definition="approval")


def test_forge_check_proves_the_approval_definition_and_forge_diagram_draws_it(tmp_path):
    check = subprocess.run([sys.executable, "-m", "forge.cli", "check", "machines/approval.toml"],
                           capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.splitlines()[-1].endswith(": ok"), check.stdout
    svg = tmp_path / "x.svg"
    draw = subprocess.run([sys.executable, "-m", "forge.cli", "diagram", "approval", "-o", str(svg)],
                          capture_output=True, text=True)
    assert draw.returncode == 0, draw.stderr
    text = svg.read_text()
    assert "approval_required" in text and "request_approval" in text
