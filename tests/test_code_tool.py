"""The code tool (issue 53, item 2): a model-written program, run in pydantic-monty's
sandbox, whose every call to a listed tool is a forge tool call of a child run: journaled,
approved as if the model had asked it, counted; the program's value, print output and
errors told to the model; a hostile program stopped with a clear error and nothing run
after it; a durable run paused in the middle of a program goes on after a person's answer,
in a fresh process too, doing its side effect exactly once."""

import pytest

pytest.importorskip("pydantic_monty", reason="the code extra is a test dependency: python3 tasks.py test installs it")

from forge import AgentLoop, Finish, Intent, UsageError, tool
from forge.code_tool import CodeLimits, CodeTool
from forge.machine.child import children_of

NOTES = {"a.md": "alpha", "b.md": "beta beta"}
READS: list[str] = []
SENT: list[tuple[str, str]] = []


@tool(errors="report")
def read_note(path: str) -> str:
    """Read a note (a missing one is an error told to the caller)."""
    READS.append(path)
    return NOTES[path]


@tool(side_effect=True)
def send(to: str, text: str) -> str:
    """Send a message."""
    SENT.append((to, text))
    return f"sent to {to}"


@pytest.fixture(autouse=True)
def fresh():
    READS.clear()
    SENT.clear()


def running(program, code_tool=None, **loop_options):
    """A loop whose policy submits `program` once and answers with what it gave back."""
    code = code_tool or CodeTool([read_note])

    def policy(goal, state):
        if not state.observations:
            return Intent.call(code.name, code=program)
        return Finish(state.observations[-1].payload)

    return AgentLoop([read_note, code], policy, lambda observation: observation.tool_name == "finish", **loop_options)


def test_each_call_the_program_makes_is_a_step_of_a_child_run_and_its_value_and_print_come_back():
    program = 'sizes = {}\nfor p in ["a.md", "b.md"]:\n    sizes[p] = len(read_note(p))\nprint("read", len(sizes))\nsizes'
    result = running(program).run("how long are my notes?")
    assert result.answer == {"value": {"a.md": 5, "b.md": 9}, "printed": "read 2\n"}
    (child,) = result.children
    assert READS == ["a.md", "b.md"] and child.result.steps == 3  # two calls and the program's end
    assert [record.detail.get("tool") for record in child.result.trace if record.source == "select"][:2] == \
        ["read_note", "read_note"]
    assert [(entry.kind, entry.name) for entry in child.result.journal if entry.kind == "tool"] == \
        [("tool", "read_note"), ("tool", "read_note")]


def test_positional_and_keyword_arguments_both_reach_the_tool_by_name():
    result = running('read_note("a.md") + read_note(path="b.md")').run("both")
    assert result.answer["value"] == "alphabeta beta" and READS == ["a.md", "b.md"]


def test_a_tool_error_is_raised_in_the_program_which_may_catch_it():
    program = 'try:\n    read_note("missing.md")\nexcept RuntimeError as error:\n    said = str(error)\nsaid'
    result = running(program).run("read a missing note")
    assert "KeyError" in result.answer["value"] and "missing.md" in result.answer["value"]


def test_a_function_the_code_tool_does_not_list_is_not_defined_in_the_program():
    result = running('send("bob", "hi")').run("send")
    assert "name 'send' is not defined: the program may call read_note" in result.answer["error"]
    assert SENT == []


@pytest.mark.parametrize(("program", "said"), [
    ("while True:\n    pass", "TimeoutError"),
    ("x = 'a' * (10 ** 9)", "MemoryError"),
    ("import os\nos.listdir('/')", "PermissionError"),
    ("open('/etc/passwd').read()", "PermissionError"),
    ("().__class__.__bases__[0].__subclasses__()", "AttributeError"),
    ("def (", "Expected"),
])
def test_a_hostile_program_is_stopped_with_a_clear_error_and_nothing_runs_after_it(program, said):
    code = CodeTool([read_note], limits=CodeLimits(seconds=0.5, memory=32 * 1024 * 1024))
    result = running(program + "\nread_note('a.md')", code).run("hostile")
    assert result.reason == "verified_success" and said in result.answer["error"]
    assert READS == []


def test_a_program_is_stopped_at_its_call_limit():
    code = CodeTool([read_note], limits=CodeLimits(calls=3))
    result = running("for _ in range(10):\n    read_note('a.md')", code).run("loop")
    assert "made 3 tool calls, its limit" in result.answer["error"] and READS == ["a.md"] * 3


def test_a_side_effect_in_a_program_is_approved_as_if_the_model_asked_for_it():
    asked = []
    code = CodeTool([read_note, send], approver=lambda request: asked.append(request.tool) or request.tool != "send")
    program = 'note = read_note("a.md")\ntry:\n    send("bob", note)\nexcept RuntimeError as refused:\n    r = str(refused)\nr'
    result = running(program, code).run("send bob my note")
    assert asked == ["send"] and SENT == []
    assert "ApprovalRejected: the approver rejected send" in result.answer["value"]


def test_a_side_effecting_tool_needs_an_approver():
    with pytest.raises(UsageError, match="send has a side effect: give CodeTool the approver"):
        CodeTool([read_note, send])


@pytest.mark.parametrize(("made", "said"), [
    (lambda: CodeTool([]), "needs the tools its programs may call"),
    (lambda: CodeLimits(seconds=0), "seconds above 0"),
    (lambda: CodeLimits(calls=0), "at least 1"),
    (lambda: CodeTool([read_note], limits={"seconds": 1}), "CodeLimits"),
])
def test_bad_code_tools_are_refused_naming_what_is_wrong(made, said):
    with pytest.raises(UsageError, match=said):
        made()


def test_the_code_tool_is_a_side_effect_of_the_loop_when_a_tool_it_lists_is_and_its_loop_is_drawn_inside():
    code = CodeTool([read_note, send], approver=lambda request: True)
    assert code.side_effect is True and CodeTool([read_note]).side_effect is False
    loop = AgentLoop([code], lambda goal, state: Finish("x"), lambda observation: True)
    assert sorted(tool.name for tool in children_of(loop)["run_code"].tools) == ["read_note", "send"]


def test_a_replay_of_the_run_calls_no_tool_and_runs_no_program():
    loop = running('read_note("a.md") + read_note("b.md")')
    result = loop.run("both")
    READS.clear()
    again = loop.replay(result.journal)
    assert (again.trace, again.answer, READS) == (result.trace, result.answer, [])


def test_a_program_made_again_from_its_recorded_calls_goes_on_as_the_live_one_would(make):
    """A durable run paused at the program's side effect for a person, in a process that
    never saw the program run (its live programs forgotten): the program is made again, its
    read answered from the journal (not read again), and the side effect is done once."""
    from forge.durable import Answer

    code = CodeTool([read_note, send], approver=lambda request: None)
    program = 'note = read_note("a.md")\nsend("bob", note)\n"done: " + note'
    durable = make(running(program, code, definition="approval", approver=lambda request: True))
    waiting = durable.run("send bob my note", run_id="code-wait")
    assert (waiting.status, waiting.waiting.run, READS, SENT) == ("waiting", "code-wait/run_code.1", ["a.md"], [])
    programs = code.child.spec.config.policy
    assert programs.live == 1  # paused at send, live in this process
    programs.forget()  # as a new worker: no live program
    done = durable.resume("code-wait", Answer.approve(waiting.waiting.fingerprint))
    assert (done.status, done.reason) == ("finished", "verified_success")
    assert (READS, SENT) == (["a.md"], [("bob", "alpha")])


RANDOM_SEND = 'import random\nn = str(random.randint(1, 10 ** 9))\nsend("bob", n)\nn'


def _paused_then_forgotten(make, run_id):
    """A durable run of RANDOM_SEND waiting for the send's approval, its live program
    forgotten (as in a new worker); the durable loop, what it waits for, and the call."""
    code = CodeTool([read_note, send], approver=lambda request: None)
    durable = make(running(RANDOM_SEND, code, definition="approval", approver=lambda request: True))
    waiting = durable.run("send bob a number", run_id=run_id)
    code.child.spec.config.policy.forget()
    return durable, waiting, waiting.waiting.arguments


def test_a_program_drawing_random_numbers_makes_the_same_calls_when_made_again(make):
    """Its `random` is seeded from its run's path and text: made again after the approval,
    it asks the call it asked before, and goes on."""
    from forge.durable import Answer

    durable, waiting, arguments = _paused_then_forgotten(make, "lucky")
    done = durable.resume("lucky", Answer.approve(waiting.waiting.fingerprint))
    drawn = arguments["text"]
    assert [("bob", drawn)] == SENT
    assert done.answer == {"value": drawn, "printed": ""}


def test_a_program_that_makes_another_call_when_made_again_is_stopped_not_answered_with_the_recorded_one(
        make, monkeypatch):
    """Made again, the program's first call is not the one recorded (here its random numbers
    differ, as a program branching on the clock would): it ends with an error naming both
    calls, rather than taking the recorded call's outcome as its own."""
    import forge.code_tool
    from forge.durable import Answer

    durable, waiting, arguments = _paused_then_forgotten(make, "unlucky")
    monkeypatch.setattr(forge.code_tool, "_seed", lambda path, code: "another")
    done = durable.resume("unlucky", Answer.approve(waiting.waiting.fingerprint))
    drawn = arguments["text"]
    assert [("bob", drawn)] == SENT  # the approved call, done once
    said = done.answer["error"]
    assert said.startswith("the program, made again to go on, made call 1 as send({'to': 'bob', 'text': '")
    assert f"recorded send({arguments}) there" in said and "not branch on the clock" in said


def test_programs_in_two_runs_draw_different_random_numbers():
    first = running("import random\nrandom.randint(1, 10 ** 9)").run("draw", run_id="one")
    second = running("import random\nrandom.randint(1, 10 ** 9)").run("draw", run_id="two")
    assert first.answer["value"] != second.answer["value"]


def test_a_code_tool_whose_calls_pass_the_loops_guards_is_a_guarded_side_effect_and_one_without_is_not():
    from forge import Guard, Hooks
    from forge.check import check_loop

    guards = [Guard("sends", lambda arguments: None, tools=["send"])]

    def agent(code):
        return AgentLoop([send, code], lambda goal, state: Finish("x"), lambda observation: True,
                         definition="guarded", hooks=Hooks(guards=guards))

    covered = agent(CodeTool([read_note, send], guards=guards, approver=lambda request: True))
    assert check_loop(covered, require=["guarded-side-effects"]).violations == ()
    (violation,) = check_loop(agent(CodeTool([read_note, send], approver=lambda request: True)),
                              require=["guarded-side-effects"]).violations
    assert violation.message.startswith("run_code (no guard of the loop covers it)")


def test_a_guard_given_to_the_code_tool_refuses_a_programs_call_which_the_program_hears_of():
    from forge import Guard, Trip

    no_bob = Guard("no_bob", lambda arguments: Trip("not bob") if arguments["to"] == "bob" else None,
                   tools=["send"], on_trip="replan")
    code = CodeTool([read_note, send], guards=[no_bob], approver=lambda request: True)
    program = 'try:\n    send("bob", "hi")\nexcept RuntimeError as e:\n    print(e)\nsend("ana", "hi")'
    result = running(program, code, definition="approval", approver=lambda request: True).run("send")
    assert SENT == [("ana", "hi")] and "not bob" in result.answer["printed"]


def _program_sent_once_after(tmp_path, killed, monkeypatch=None, die_at: str = "") -> None:
    """Issue 53's done-when, with real `forge worker` processes: the program reads a note and
    its send waits for a person; the first worker dies (`killed(worker, runs)`); the answer
    goes to a second worker. The read is replayed from the child's stored calls and the send
    is made exactly once, after the answer."""
    import signal
    from pathlib import Path

    from test_worker_stop import start_worker, stop

    from forge.durable import Answer
    from forge.durable.runs import StoredRuns

    loops = str(Path(__file__).with_name("code_worker_loops.py"))
    db, ledger = str(tmp_path / "runs.sqlite"), tmp_path / "ledger"
    with StoredRuns(db, create=True) as runs:
        runs.submit("code-sender", "send bob my note", "program-1")
        if monkeypatch is not None:
            monkeypatch.setenv("FORGE_TEST_DIE_AT", die_at)
        first = start_worker(db, ledger, loops)
        try:
            asked = runs.wait("program-1", timeout=120)
            killed(first, runs)
        finally:
            first.kill()
            first.wait(30)
        if monkeypatch is not None:
            monkeypatch.delenv("FORGE_TEST_DIE_AT")
            monkeypatch.setenv("FORGE_TEST_SEND_SECONDS", "4")  # past the dead worker's recovery (~2.5 s)
        assert asked.waiting.run == "program-1/run_code.1" and asked.waiting.tool == "send"
        assert ledger.read_text().splitlines() == ["read todo.md"]
        runs.resume("program-1", Answer.approve(asked.waiting.fingerprint))
        second = start_worker(db, ledger, loops)
        try:
            done = runs.wait("program-1", timeout=120, answers=1)
        finally:
            stop(second, signal.SIGTERM)
    assert (done.status, done.reason) == ("finished", "verified_success")
    assert ledger.read_text().splitlines() == ["read todo.md", "send bob buy milk"], ledger.read_text()
    assert done.answer == {"value": "sent: buy milk", "printed": ""}


@pytest.mark.slow
def test_a_program_waiting_for_approval_survives_its_worker_killed_and_sends_once_after_the_answer(tmp_path):
    """The worker is SIGKILLed once the run has parked (its workflow ended, holding no worker)."""
    from test_worker_stop import eventually

    def parked_then_killed(worker, runs):
        eventually(lambda: str(runs.client.list_workflows(workflow_ids=["program-1"], load_input=False)[0].status)
                   == "SUCCESS")
        worker.kill()

    _program_sent_once_after(tmp_path, parked_then_killed)


@pytest.mark.slow
@pytest.mark.parametrize("moment", ["parking", "parked"])
def test_a_worker_dying_as_a_program_parks_for_approval_leaves_one_execution_to_send_once(tmp_path, monkeypatch,
                                                                                        moment):
    """The worker dies as the run parks: after it said it waits and before it parked
    ("parking"), or once parked and before its workflow ended ("parked"). The answer comes
    while the dead worker's workflow is pending; the second worker recovers that workflow,
    and only one of it and the workflow the answer starts goes on: the send is made once."""
    def died(worker, runs):
        assert worker.wait(60) == 9

    _program_sent_once_after(tmp_path, died, monkeypatch, moment)


@pytest.mark.parametrize(("call", "said"), [
    ('read_note("a.md", "b.md")', "read_note() takes 1 arguments (path), 2 were given"),
    ('read_note("a.md", path="b.md")', "read_note() got 'path' twice"),
])
def test_a_call_with_arguments_python_would_refuse_raises_the_same_in_the_program(call, said):
    result = running(f"try:\n    {call}\nexcept TypeError as error:\n    r = str(error)\nr").run("odd")
    assert result.answer["value"] == said and READS == []
