"""Durable runs on DBOS with SQLite: the same trace as a run in memory, waiting runs and
their answers, approvals bound to the call, idempotency records in the database, the CLI.
One DBOS per process: this module launches it on a temporary database."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from builders import Recorder, forge
from durable_agent import calls_made

from forge import AgentLoop, Finish, Intent, Tool
from forge.durable import Answer, AnswerRefused, database_url, launch
from forge.errors import UsageError

AGENT = str(Path(__file__).with_name("durable_agent.py"))


def scripted(*plan):
    """A policy that decides from the observations alone: the n-th step does plan[n]."""
    def policy(goal, state):
        step = state.step_count
        return plan[step] if step < len(plan) else Finish("done")
    return policy


def finished(observation):
    return observation.tool_name == "finish"


def test_a_durable_run_has_the_trace_of_the_same_run_in_memory(make):
    read = Recorder("a", "b")
    loop = AgentLoop([Tool("read", {"read"}, read, optional={"n"})],
                     scripted(Intent.call("read", n=1), Intent.call("read", n=2)), finished)
    in_memory = loop.run("goal")
    read.outcomes = ["a", "b"]
    result = make(loop).run("goal", run_id="same-trace")
    assert result.status == "finished" and result.reason == "verified_success" and result.outcome == "success"
    assert result.trace == tuple(in_memory.trace)
    assert {record.run_id for record in result.trace} == {"same-trace"}


def test_running_an_existing_run_id_is_the_same_run_and_calls_nothing_again(make):
    write = Recorder("ok")
    durable = make(AgentLoop([Tool("write", {"write"}, write, side_effect=True)],
                             scripted(Intent.call("write")), finished))
    first = durable.run("goal", run_id="once")
    second = durable.run("goal", run_id="once")
    assert len(write.calls) == 1 and second.trace == first.trace and second.status == "finished"


def test_a_side_effects_outcome_lives_in_the_runs_database_journal_as_json(make, db):
    durable = make(AgentLoop([Tool("write", {"write"}, Recorder("ok"), side_effect=True, optional={"n"})],
                             scripted(Intent.call("write", n=1)), finished))
    durable.run("goal", run_id="stored-effect")
    with sa.create_engine(database_url(db)).connect() as connection:
        rows = connection.execute(sa.text("select entry from forge_journal where run_id = 'stored-effect' "
                                          "order by turn, seq")).all()
    calls = [json.loads(bytes(row[0])) for row in rows]
    assert [(call["kind"], call["name"]) for call in calls] == [("policy", "policy"), ("tool", "write"),
                                                                ("verify", "verify"), ("policy", "policy"),
                                                                ("verify", "verify")]
    assert calls[1]["value"] == "ok" and calls[1]["identity"] == {"n": 1}


def test_a_keyed_side_effect_is_recorded_for_every_run(make, db):
    durable = make(AgentLoop([Tool("write", {"write"}, Recorder("ok"), side_effect=True, optional={"n"})],
                             scripted(Intent.call("write", n=1).keyed("stored-key")), finished))
    durable.run("goal", run_id="stored-keyed")
    with sa.create_engine(database_url(db)).connect() as connection:
        rows = connection.execute(sa.text("select key, run_id from forge_idempotency where key = 'stored-key'")).all()
    assert rows == [("stored-key", "stored-keyed")]


def test_an_intent_key_shared_by_two_runs_runs_its_side_effect_once(make):
    charge = Recorder("charged")
    durable = make(AgentLoop([Tool("charge", {"pay"}, charge, side_effect=True, optional={"cents"})],
                             scripted(Intent.call("charge", cents=500).keyed("order-7")), finished))
    one, two = durable.run("pay", run_id="pay-1"), durable.run("pay", run_id="pay-2")
    assert len(charge.calls) == 1
    assert one.trace[1].detail["replayed"] is False and two.trace[1].detail["replayed"] is True


def ambiguous_loop():
    tools = [Tool("fast", {"search"}, Recorder("fast result")), Tool("slow", {"search"}, Recorder("slow result"))]
    return AgentLoop(tools, scripted(Intent({"search"}, {"q": "x"})), finished)


def test_a_run_that_needs_a_clarification_waits_and_a_chosen_tool_continues_it(make):
    durable = make(ambiguous_loop())
    waiting = durable.run("find x", run_id="clarify")
    assert waiting.status == "waiting" and waiting.reason == "clarification_required"
    assert waiting.waiting.state == "clarification_required" and set(waiting.waiting.tied) == {"fast", "slow"}
    done = durable.resume("clarify", Answer.tool("slow"))
    assert done.status == "finished" and done.reason == "verified_success"
    answered = after_the_answer(done, "clarification_required")
    assert len(done.traces) == 1 and answered[0].detail == {"answer": "tool", "tool": "slow"}
    assert answered[1].detail["tool"] == "slow" and json.loads(answered[1].detail["arguments"]) == {"q": "x"}


def after_the_answer(result, waited_in, number=1):
    """The records of a durable run from its `number`-th answer on (the answer's own
    first), checking that the run waited in `waited_in` and went on in the same trace."""
    at = [index for index, record in enumerate(result.trace) if record.trigger == "answer"][number - 1]
    assert result.trace[at].source == waited_in and result.trace[at].dest == "select"
    return result.trace[at:]


def test_an_answer_naming_a_tool_that_did_not_tie_is_refused(make):
    durable = make(AgentLoop([*ambiguous_loop().tools, Tool("other", {"misc"}, Recorder())],
                             scripted(Intent({"search"}, {"q": "x"})), finished))
    durable.run("find x", run_id="clarify-wrong")
    with pytest.raises(AnswerRefused, match="not one of the tools that tied"):
        durable.resume("clarify-wrong", Answer.tool("other"))
    with pytest.raises(AnswerRefused, match="answer with tool"):
        durable.resume("clarify-wrong", Answer.approve("abc"))
    assert durable.status("clarify-wrong").status == "waiting"


def test_a_capability_gap_is_answered_with_one_of_the_extra_tools(make):
    translate = Tool("translate", {"translate"}, Recorder("bonjour"), optional={"text"})
    with pytest.raises(UsageError, match="extra tool 'read'"):
        make(AgentLoop([Tool("read", {"read"}, Recorder())], scripted(), finished),
             extra_tools=[Tool("read", {"x"}, Recorder())])
    durable = make(AgentLoop([Tool("read", {"read"}, Recorder())], scripted(Intent({"translate"}, {"text": "hi"})),
                             finished), extra_tools=[translate])
    waiting = durable.run("translate hi", run_id="gap")
    assert waiting.reason == "capability_gap" and waiting.waiting.capabilities == ("translate",)
    with pytest.raises(AnswerRefused, match="extra_tools"):
        durable.resume("gap", Answer.add_tool("dictionary"))
    done = durable.resume("gap", Answer.add_tool("translate"))
    assert done.reason == "verified_success" and after_the_answer(done, "capability_gap")[1].detail["tool"] == "translate"


def approval_loop(write):
    return AgentLoop([Tool("write", {"write"}, write, side_effect=True, optional={"path"})],
                     scripted(Intent.call("write", path="a.md")), finished, definition="approval",
                     approver=lambda request: None)


def test_a_side_effect_waits_for_an_approval_of_that_exact_call(make):
    write = Recorder("written")
    durable = make(approval_loop(write))
    waiting = durable.run("write a.md", run_id="approve")
    assert waiting.reason == "approval_required" and waiting.waiting.tool == "write"
    assert waiting.waiting.arguments == {"path": "a.md"} and write.calls == []
    with pytest.raises(AnswerRefused, match="bound to the exact call"):
        durable.resume("approve", Answer.approve("0" * 64))
    done = durable.resume("approve", Answer.approve(waiting.waiting.fingerprint))
    assert done.reason == "verified_success" and write.calls == [{"path": "a.md"}]


def test_a_rejected_call_is_told_to_the_policy_which_replans(make):
    write = Recorder("written")
    durable = make(approval_loop(write))
    waiting = durable.run("write a.md", run_id="reject")
    done = durable.resume("reject", Answer.reject(waiting.waiting.fingerprint))
    assert write.calls == []
    answered = after_the_answer(done, "approval_required")
    assert answered[2].detail["approval"] == "rejected"
    assert answered[3].detail["status"] == "retryable_error"  # told to the policy, which then finished
    assert done.reason == "verified_success" and answered[5].source == "select"


def test_resuming_a_run_that_is_not_waiting_is_refused(make):
    durable = make(AgentLoop([Tool("read", {"read"}, Recorder())], scripted(Intent.call("read")), finished))
    durable.run("goal", run_id="not-waiting")
    with pytest.raises(AnswerRefused, match="finished, not waiting"):
        durable.resume("not-waiting", Answer.tool("read"))


def test_a_cancelled_waiting_run_is_cancelled(make):
    durable = make(ambiguous_loop())
    durable.run("find x", run_id="cancel-me")
    durable.cancel("cancel-me")
    assert durable.status("cancel-me").status == "cancelled"


def test_an_unknown_run_id_is_named(make):
    durable = make(AgentLoop([Tool("read", {"read"}, Recorder())], scripted(), finished))
    with pytest.raises(LookupError, match="no durable run 'nope'"):
        durable.status("nope")


def test_a_durable_loop_needs_a_name_of_its_own(make, db):
    loop = AgentLoop([Tool("read", {"read"}, Recorder())], scripted(), finished)
    first = make(loop)
    with pytest.raises(UsageError, match="exists in this process already"):
        loop.durable(name=first.name, db=db)
    with pytest.raises(UsageError, match="non-blank name"):
        loop.durable(name=" ", db=db)


def test_one_process_has_one_runs_database(db, tmp_path):
    with pytest.raises(UsageError, match="one process has one runs database"):
        launch(tmp_path / "other.sqlite")


def test_database_urls():
    assert database_url("runs.sqlite") == f"sqlite:///{Path('runs.sqlite').resolve()}"
    assert database_url("postgresql://forge@localhost/runs") == "postgresql://forge@localhost/runs"
    with pytest.raises(UsageError, match="SQLite .* or PostgreSQL"):
        database_url("mysql://x/y")


def test_forge_runs_lists_shows_and_answers_a_waiting_run_from_another_process(make, db):
    durable = make(ambiguous_loop())
    durable.run("find x", run_id="cli-wait")
    listed = forge("runs", "list", "--db", str(db))
    assert listed.returncode == 0 and "cli-wait" in listed.stdout
    shown = forge("runs", "show", "cli-wait", "--db", str(db))
    assert "waiting in clarification_required: which tool should run: fast or slow?" in shown.stdout
    assert "Answer." not in shown.stdout  # words and commands, not Python (issue 54, item 5)
    refused = forge("runs", "resume", "cli-wait", "--db", str(db), "--tool", "nope")
    assert refused.returncode == 1 and "no tool named 'nope'" in refused.stderr and "Traceback" not in refused.stderr
    answered = forge("runs", "resume", "cli-wait", "--db", str(db), "--tool", "fast")
    assert answered.returncode == 0, answered.stderr
    assert durable.wait("cli-wait", timeout=30, answers=1).reason == "verified_success"


def test_forge_runs_show_and_follow_print_the_commands_that_answer_a_waiting_run(make, db):
    """The command line speaks commands, not Python (issue 54, item 5); `follow` exits 3 while
    the run waits, as `forge run` does for a run that needs input."""
    import shlex

    durable = make(ambiguous_loop())
    durable.run("find y", run_id="cli-commands")
    shown = forge("runs", "show", "cli-commands", "--db", str(db))
    commands = [line.split("answer: ", 1)[1] for line in shown.stdout.splitlines() if line.startswith("  answer: ")]
    tied = durable.status("cli-commands").waiting.tied
    assert commands == [f"forge runs resume cli-commands --db {shlex.quote(str(db))} --tool {name}" for name in tied]
    followed = forge("runs", "follow", "cli-commands", "--db", str(db))
    assert followed.returncode == 3 and commands[0] in followed.stdout
    answered = forge(*shlex.split(commands[-1])[1:])
    assert answered.returncode == 0, answered.stderr
    assert durable.wait("cli-commands", timeout=30, answers=1).reason == "verified_success"
    assert forge("runs", "follow", "cli-commands", "--db", str(db)).returncode == 0


def test_forge_replay_opens_a_stored_run_without_running_it(make, db):
    durable = make(AgentLoop([Tool("read", {"read"}, Recorder("text"))], scripted(Intent.call("read")), finished))
    durable.run("goal", run_id="cli-replay")
    out = subprocess.run([sys.executable, "-m", "forge", "replay", "cli-replay", "--db", str(db)],
                         input="step 4\nobs\nquit\n", capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "the whole run: " in out.stdout and "#1 read: ok · text" in out.stdout  # whole by default (issue 24, 28)


def test_forge_debug_steps_back_through_a_stored_run_without_running_it(make, db):
    read = Recorder("text")
    durable = make(AgentLoop([Tool("read", {"read"}, read)], scripted(Intent.call("read")), finished))
    durable.run("goal", run_id="cli-debug")
    out = subprocess.run([sys.executable, "-m", "forge", "debug", "cli-debug", "--db", str(db)],
                         input="break verify\ncontinue\nback\nwhere\nquit\n", capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "stopped at breakpoint #1 state verify" in out.stdout and "back over 3" in out.stdout
    assert len(read.calls) == 1  # the durable run's one call; the debugger ran nothing


def test_forge_runs_show_of_an_unknown_run_says_so(db):
    out = forge("runs", "show", "missing", "--db", str(db))
    assert out.returncode == 1 and "Traceback" not in out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("forge: error: no durable run 'missing' in ")


def test_a_pending_approval_survives_its_process_and_is_answered_from_another(tmp_path):
    base = [sys.executable, AGENT, "run", str(tmp_path / "runs.sqlite"), str(tmp_path / "ledger"), "approvals-run",
            "--approvals"]
    first = subprocess.run(base, capture_output=True, text=True, timeout=60)
    end = json.loads(first.stdout.splitlines()[-1])
    assert end["status"] == "waiting" and end["waiting"]["state"] == "approval_required"
    for answers in range(1, 4):  # each write waits for its own approval, answered by another process each time
        fingerprint = end["waiting"]["fingerprint"]
        answered = forge("runs", "resume", "approvals-run", "--db", str(tmp_path / "runs.sqlite"), "--approve",
                         fingerprint)
        assert answered.returncode == 0, answered.stderr
        again = subprocess.run([*base, "--answers", str(answers)], capture_output=True, text=True, timeout=60)
        end = json.loads(again.stdout.splitlines()[-1])
    assert end == {"status": "finished", "reason": "verified_success"}
    made = calls_made(tmp_path / "ledger")
    assert len(made) == 3 and set(made.values()) == {1}  # each approved write called once, in whichever process


def test_a_call_running_at_a_crash_with_on_crash_ask_waits_in_doubt(tmp_path):
    base = [sys.executable, AGENT, "run", str(tmp_path / "runs.sqlite"), str(tmp_path / "ledger"), "doubt", "--ask"]
    killed = subprocess.run([*base, "--crash-at", "2", "--in-tool"], capture_output=True, text=True, timeout=60)
    assert killed.returncode == -9
    recovered = subprocess.run(base, capture_output=True, text=True, timeout=60)
    end = json.loads(recovered.stdout.splitlines()[-1])
    assert end["status"] == "waiting" and end["waiting"]["state"] == "in_doubt"
    assert end["waiting"]["tool"] == "write_entry" and end["waiting"]["key"] == "doubt/6/write_entry"
    answered = forge("runs", "resume", "doubt", "--db", str(tmp_path / "runs.sqlite"), "--did-run", '"filed beta"')
    assert answered.returncode == 0, answered.stderr
    done = subprocess.run([*base, "--answers", "1"], capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout.splitlines()[-1]) == {"status": "finished", "reason": "verified_success"}
    calls = (tmp_path / "ledger.calls").read_text().splitlines()
    assert calls.count("write_entry\tdoubt/6/write_entry") == 1  # not called again: a person said it ran


def test_run_again_calls_the_call_in_doubt_again_with_the_same_key(tmp_path):
    base = [sys.executable, AGENT, "run", str(tmp_path / "runs.sqlite"), str(tmp_path / "ledger"), "again", "--ask"]
    subprocess.run([*base, "--crash-at", "1", "--in-tool"], capture_output=True, text=True, timeout=60)
    subprocess.run(base, capture_output=True, text=True, timeout=60)
    answered = forge("runs", "resume", "again", "--db", str(tmp_path / "runs.sqlite"), "--run-again")
    assert answered.returncode == 0, answered.stderr
    done = subprocess.run([*base, "--answers", "1"], capture_output=True, text=True, timeout=60)
    assert json.loads(done.stdout.splitlines()[-1])["reason"] == "verified_success"
    calls = (tmp_path / "ledger.calls").read_text().splitlines()
    assert calls.count("write_entry\tagain/5/write_entry") == 2
    assert len((tmp_path / "ledger").read_text().splitlines()) == 3  # the key kept the ledger right


def test_forge_submit_queues_runs_that_a_forge_worker_finishes(tmp_path):
    import os
    import signal

    db, ledger = tmp_path / "queue.sqlite", tmp_path / "ledger"
    ids = []
    for number in range(3):
        submitted = forge("submit", "file every item", "--loop", "filing", "--db", str(db), "--run-id", f"queued-{number}")
        assert submitted.returncode == 0, submitted.stderr
        ids.append(submitted.stdout.strip())
    assert ids == ["queued-0", "queued-1", "queued-2"]
    env = dict(os.environ, FORGE_TEST_LEDGER=str(ledger), FORGE_TEST_DB=str(db))
    worker = subprocess.Popen([sys.executable, "-m", "forge", "worker", "--db", str(db), "--concurrency", "2", "--loops",
                               str(Path(__file__).with_name("durable_workers.py"))], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        from forge.durable.runs import StoredRuns

        with StoredRuns(db) as runs:
            results = [runs.wait(run_id, timeout=120) for run_id in ids]
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    assert [r.reason for r in results] == ["verified_success"] * 3
    assert worker.returncode == 0
    made = calls_made(ledger)
    assert len(made) == 9 and set(made.values()) == {1}  # each write of each run called once


def test_the_docs_loops_module_runs_in_a_worker_a_submitted_run_waits_and_is_approved(tmp_path):
    import os
    import signal

    module = Path(__file__).resolve().parents[1] / "examples" / "notes_worker.py"
    db = tmp_path / "runs.sqlite"
    env = dict(os.environ, FORGE_DB=str(db), FORGE_NOTES=str(tmp_path / "notes"))
    worker = subprocess.Popen([sys.executable, "-m", "forge", "worker", "--db", str(db), "--loops", str(module)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        from forge.durable.runs import StoredRuns

        for _ in range(200):  # the worker serves the loop once it has started
            submitted = forge("submit", "note: buy milk", "--loop", "notes", "--db", str(db), "--run-id", "note-1")
            if submitted.returncode == 0:
                break
            time.sleep(0.1)
        assert submitted.returncode == 0, submitted.stderr
        with StoredRuns(db) as runs:
            waiting = runs.wait("note-1", timeout=120)
            assert (waiting.status, waiting.reason) == ("waiting", "approval_required")
            shown = forge("runs", "show", "note-1", "--db", str(db))
            assert waiting.waiting.fingerprint in shown.stdout
            resumed = forge("runs", "resume", "note-1", "--approve", waiting.waiting.fingerprint, "--db", str(db))
            assert resumed.returncode == 0, resumed.stderr
            done = runs.wait("note-1", timeout=120, answers=1)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    assert (done.status, done.reason) == ("finished", "verified_success")
    assert (tmp_path / "notes" / "buy.md").read_text() == "buy milk\n"


def test_a_worker_with_no_loops_module_says_what_is_missing(tmp_path):
    out = forge("worker", "--db", str(tmp_path / "w.sqlite"), "--loops", str(tmp_path / "missing.py"))
    assert out.returncode == 1 and "missing.py" in out.stderr and "Traceback" not in out.stderr


def test_two_concurrent_runs_with_one_intent_key_run_the_tool_once(make, monkeypatch):
    """A forced interleaving, not hope: both runs decide before either pays (a barrier that
    fails the run if broken), and the one that pays holds its call until the other has
    tried to claim the key; so the runs overlap in the claim, and only the claim keeps the
    call to one."""
    import threading

    from forge.durable.workflow import HOST

    paid: list[str] = []
    both_decided = threading.Barrier(2, timeout=20)
    tried: list[str] = []
    both_tried = threading.Event()
    claim = HOST.database.claim

    def counted_claim(key, fingerprint, run_id):
        tried.append(run_id)
        if len(set(tried)) == 2:
            both_tried.set()
        return claim(key, fingerprint, run_id)

    monkeypatch.setattr(HOST.database, "claim", counted_claim)

    def pay(invoice):
        paid.append(invoice)
        assert both_tried.wait(20), "the other run never tried the claim while this one paid"
        return f"paid {invoice}"

    def policy(goal, state):
        if state.step_count:
            return Finish("done")
        both_decided.wait()  # both runs decide before either pays; a broken barrier fails the run
        return Intent.call("pay", invoice="42").keyed("invoice-42-once")

    durable = make(AgentLoop([Tool("pay", {"pay"}, pay, required={"invoice"}, side_effect=True)], policy, finished))
    ids = [durable.start("pay invoice 42", run_id=f"pay-once-{n}") for n in range(2)]
    results = [durable.wait(run_id, timeout=60) for run_id in ids]
    assert [r.reason for r in results] == ["verified_success", "verified_success"]
    assert sorted(set(tried)) == sorted(ids)  # both runs reached the claim
    assert paid == ["42"]
    replayed = sorted(r.trace[1].detail["replayed"] for r in results)
    assert replayed == [False, True]


def test_the_one_private_dbos_call_is_there_in_the_dbos_checked_against():
    from importlib.metadata import version

    from dbos import DBOS

    from forge.durable import worker

    assert version("dbos").startswith(worker.CHECKED_DBOS)
    assert callable(DBOS._recover_pending_workflows)
    private = [line for path in Path(worker.__file__).parent.glob("*.py") for line in path.read_text().splitlines()
               if "DBOS._" in line]
    assert private == ["    return DBOS._recover_pending_workflows([executor])"]


def _listed_status(db, run_id):
    listed = forge("runs", "list", "--db", str(db))
    assert listed.returncode == 0, listed.stderr
    return next(line.split()[1] for line in listed.stdout.splitlines() if line.startswith(run_id))


def test_item_27_list_and_show_use_one_vocabulary_and_always_show_the_goal(make, db):
    durable = make(approval_loop(Recorder("written")))
    durable.run("write a.md", run_id="vocabulary-waiting")
    durable.submit("write b.md", run_id="vocabulary-queued")  # no worker here: it stays queued
    for run_id, status, goal in (("vocabulary-waiting", "waiting", "write a.md"),
                                 ("vocabulary-queued", "queued", "write b.md")):
        assert _listed_status(db, run_id) == status
        shown = forge("runs", "show", run_id, "--db", str(db)).stdout.splitlines()
        assert shown[0].startswith(f"run {run_id} · {durable.name} · {status}") and shown[1] == f"goal: {goal}"
    durable.cancel("vocabulary-queued")


def test_item_28_a_durable_runs_summary_counts_the_steps_before_and_after_an_answer(make):
    tools = [Tool("read", {"read"}, Recorder("text"), optional={"path"}),
             Tool("write", {"write"}, Recorder("written"), side_effect=True, optional={"path"})]
    durable = make(AgentLoop(tools, scripted(Intent.call("read", path="a.md"), Intent.call("write", path="b.md")),
                             finished, definition="approval", approver=lambda request: None))
    waiting = durable.run("copy a.md to b.md", run_id="whole-summary")
    done = durable.resume("whole-summary", Answer.approve(waiting.waiting.fingerprint))
    steps = sum(1 for record in done.trace if record.source == "observe")
    assert len(done.traces) == 1 and steps == 3
    assert f"after {steps} steps" in done.summary


def test_item_26_resuming_a_run_no_live_process_serves_says_so_and_what_to_start(tmp_path):
    db, ledger = tmp_path / "runs.sqlite", tmp_path / "ledger"
    started = subprocess.run([sys.executable, AGENT, "run", str(db), str(ledger), "nobody-serves", "--approvals"],
                             capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stderr
    fingerprint = json.loads(started.stdout.splitlines()[-1])["waiting"]["fingerprint"]
    answered = forge("runs", "resume", "nobody-serves", "--approve", fingerprint, "--db", str(db), "--wait", "1")
    assert answered.returncode == 1, answered.stderr
    lines = answered.stdout.splitlines()
    assert lines[0] == "answered nobody-serves"
    assert lines[1].startswith("note: no forge worker is live") and "forge worker --db" in lines[1]
    assert "durable loop named 'filing'" in lines[1]
    assert lines[2].startswith("still waiting after 1 s: no forge worker is live")


WAITING_SCRIPT = """
import sys
import time
sys.path.insert(0, {tests!r})
from builders import Recorder, forge
from forge import AgentLoop, Finish, Intent, Tool

def policy(goal, state):
    return Intent.call("write", path="a.md") if not state.observations else Finish("done")

loop = AgentLoop([Tool("write", {{"write"}}, Recorder("ok"), side_effect=True, optional={{"path"}})], policy,
                 lambda o: o.tool_name == "finish", definition="approval", approver=lambda request: None)
{body}
"""


@pytest.mark.parametrize("body", [
    'durable = loop.durable(name="w", db=sys.argv[1])\nprint(durable.run("write a.md", run_id="r").status)',
    'with loop.durable(name="w", db=sys.argv[1]) as durable:\n    print(durable.run("write a.md", run_id="r").status)',
])
def test_item_25_a_program_whose_run_waits_exits_on_its_own_and_the_run_stays_waiting(tmp_path, body):
    script = tmp_path / "waits.py"
    script.write_text(WAITING_SCRIPT.format(tests=str(Path(__file__).parent), body=body))
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "runs.sqlite")], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "waiting", done.stderr
    assert "Traceback" not in done.stderr
    shown = forge("runs", "show", "r", "--db", str(tmp_path / "runs.sqlite"))
    assert " · waiting" in shown.stdout.splitlines()[0]


def test_item_4_two_answers_to_one_clarification_one_is_taken_and_the_other_refused(make):
    from concurrent.futures import ThreadPoolExecutor

    tools = [Tool("fast", {"search"}, Recorder("fast result", "fast again")),
             Tool("slow", {"search"}, Recorder("slow result", "slow again"))]
    asks_twice = scripted(Intent({"search"}, {"q": "x"}), Intent({"search"}, {"q": "y"}))  # two questions in a row
    durable = make(AgentLoop(tools, asks_twice, finished))
    durable.run("find x and y", run_id="two-answers")

    def answer(name):  # two people answering the question they were shown, question 1, at once
        try:
            return durable.resume("two-answers", Answer("tool", name, question=1), timeout=30)
        except AnswerRefused as refused:
            return refused

    with ThreadPoolExecutor(2) as pool:
        outcomes = list(pool.map(answer, ["fast", "slow"]))
    refused = [o for o in outcomes if isinstance(o, AnswerRefused)]
    # the loser's words say its question was answered, whether it came while the run still waited
    # on it (the claim decides) or once the run had taken the other answer and gone on
    assert len(refused) == 1 and ("answered already" in str(refused[0])
                                  or "that answer was for question 1; the run no longer waits" in str(refused[0]))
    now = durable.status("two-answers")
    assert now.status == "waiting" and now.answers == 1  # the second question waits: the loser did not answer it
    with pytest.raises(AnswerRefused, match="that answer was for question 1; the run no longer waits for it"):
        durable.resume("two-answers", Answer("tool", "fast", question=1))
    done = durable.resume("two-answers", Answer.tool("slow"), timeout=30)
    assert done.status == "finished" and done.answers == 2


def test_item_5_an_approve_and_a_reject_at_the_same_moment_exactly_one_is_accepted(make, db):
    from concurrent.futures import ThreadPoolExecutor

    durable = make(approval_loop(Recorder("written")))
    waiting = durable.run("write a.md", run_id="approve-or-reject")
    fingerprint = waiting.waiting.fingerprint
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda how: forge("runs", "resume", "approve-or-reject", "--db", str(db), how,
                                                  fingerprint), ["--approve", "--reject"]))
    assert sorted(a.returncode for a in answers) == [0, 1], [a.stderr for a in answers]
    loser = next(a for a in answers if a.returncode == 1)
    # refused as answered already, or, once the winner's answer has the run going (running or finished), as not
    # waiting: which one depends only on how far the run got before the loser looked
    assert ("answered already" in loser.stderr or "not waiting for an answer" in loser.stderr), loser.stderr
    assert len(loser.stderr.strip().splitlines()) == 1
    assert durable.wait("approve-or-reject", timeout=30, answers=1).answers == 1


def test_item_28_replay_debug_and_inspect_show_a_stored_run_whole(make, db, tmp_path):
    durable = make(approval_loop(Recorder("written")))
    waiting = durable.run("write a.md", run_id="whole-run")
    done = durable.resume("whole-run", Answer.approve(waiting.waiting.fingerprint))
    total = len(done.trace)
    assert len(done.traces) == 1 and after_the_answer(done, "approval_required")
    replayed = subprocess.run([sys.executable, "-m", "forge", "replay", "whole-run", "--db", str(db)],
                              input=f"step {total}\nobs\nquit\n", capture_output=True, text=True, timeout=60)
    assert replayed.returncode == 0, replayed.stderr
    assert f"the whole run: {total} transitions" in replayed.stdout
    observations = [line for line in replayed.stdout.splitlines() if line.startswith("#")]
    assert observations[-1].startswith("#2 finish: ok") and "a.md" not in observations[-1]  # not the write's arguments
    turned = subprocess.run([sys.executable, "-m", "forge", "debug", "whole-run", "--db", str(db), "--turn", "2"],
                            input="quit\n", capture_output=True, text=True, timeout=60)
    assert turned.returncode == 1 and "is one run, answers and all" in turned.stderr
    page = tmp_path / "whole.html"
    inspected = forge("inspect", "whole-run", "--db", str(db), "-o", str(page))
    assert inspected.returncode == 0, inspected.stderr
    assert f"{total} transitions" in inspected.stdout and page.exists()


def test_a_chat_policy_s_requests_are_stored_and_a_recovered_run_asks_the_model_nothing(make, db):
    openai = pytest.importorskip("openai")
    from chat_server import ChatServer, reply

    from forge.models.chat import ChatPolicy

    def loop(url):
        policy = ChatPolicy("test-model", client=openai.OpenAI(base_url=url, api_key="test", max_retries=0))
        return AgentLoop([Tool("read", {"read"}, Recorder("the note"), optional={"n"})], policy, finished)

    with ChatServer([reply(None, ("c1", "read", {"n": 1})), reply("It says: the note.")]) as server:
        first = make(loop(server.url)).run("read it", run_id="chat-stored")
    assert first.answer == "It says: the note."
    with sa.create_engine(database_url(db)).connect() as connection:
        rows = connection.execute(sa.text("select entry from forge_journal where run_id = 'chat-stored' "
                                          "order by turn, seq")).all()
    calls = [json.loads(bytes(row[0])) for row in rows]
    assert [call["kind"] for call in calls] == ["model", "policy", "tool", "verify", "model", "policy", "verify"]
    assert calls[0]["request"]["model"] == "test-model"
    again = make(loop("http://127.0.0.1:9/v1")).run("read it", run_id="chat-stored")
    assert again.answer == first.answer and again.trace == first.trace


def test_runs_show_says_why_a_run_errored(make, db, monkeypatch):
    """A run whose workflow failed outside the agent (`error`): `forge runs show` and
    `StoredRuns.get` give the exception DBOS stored, which the list does not load."""
    from forge.durable import workflow

    def broken(self):
        raise RuntimeError("the runs' disk is full")

    monkeypatch.setattr(workflow._Workflow, "run", broken)
    durable = make(AgentLoop([Tool("read", {"read"}, Recorder("text"), optional={"path"})],
                             scripted(Intent.call("read", path="a.md")), finished))
    ended = durable.run("read a.md", run_id="errored-run")
    assert ended.status == "error" and "the runs' disk is full" in (ended.error or "")
    assert durable.runs.get("errored-run").status == "error"
    assert durable.runs.get("errored-run").error == "RuntimeError: the runs' disk is full"
    shown = forge("runs", "show", "errored-run", "--db", str(db)).stdout.splitlines()
    assert shown[-1] == "error: RuntimeError: the runs' disk is full"


def test_runs_list_status_shows_only_the_runs_in_that_status(make, db):
    durable = make(approval_loop(Recorder("written")))
    durable.run("write a.md", run_id="listed-waiting")
    durable.submit("write b.md", run_id="listed-queued")  # no worker here: it stays queued
    try:
        waiting = forge("runs", "list", "--db", str(db), "--status", "waiting").stdout.split()
        queued = forge("runs", "list", "--db", str(db), "--status", "queued").stdout.split()
        assert "listed-waiting" in waiting and "listed-queued" not in waiting
        assert "listed-queued" in queued and "listed-waiting" not in queued
        refused = forge("runs", "list", "--db", str(db), "--status", "sleeping")
        assert refused.returncode == 2 and "invalid choice: 'sleeping'" in refused.stderr
    finally:
        durable.cancel("listed-queued")


def test_the_statuses_runs_list_takes_are_the_ones_forge_ui_shows():
    from forge.cli import RUN_STATUSES
    from forge.ui.pages import STATUSES

    assert RUN_STATUSES == STATUSES


def test_a_run_waiting_in_its_program_takes_its_answer_from_the_answers_table_not_a_dbos_message(make, db):
    """Waiting costs no commit of its own (issue 48): the question is stored with the write
    that led to it (`forge_status`), the answer once (`forge_answers`), and the run, which
    looks there, takes it; no DBOS message is sent."""
    durable = make(ambiguous_loop())
    durable.run("find z", run_id="no-message")
    with sa.create_engine(database_url(db)).connect() as connection:
        said = connection.execute(sa.text("select event from forge_status where run_id = 'no-message'")).scalar_one()
    assert json.loads(said)["status"] == "waiting" and json.loads(said)["waiting"]["state"] == "clarification_required"
    done = durable.resume("no-message", Answer.tool("fast"), timeout=30)
    assert (done.status, done.reason, done.answers) == ("finished", "verified_success", 1)
    with sa.create_engine(database_url(db)).connect() as connection:
        sent = connection.execute(sa.text("select count(*) from notifications where destination_uuid = 'no-message'"))
        answered = connection.execute(sa.text("select answer from forge_answers where run_id = 'no-message'")).all()
    assert sent.scalar_one() == 0 and [json.loads(row[0])["value"] for row in answered] == ["fast"]


def test_a_run_waiting_in_its_program_is_cancelled_where_it_waits(make):
    from forge.durable.workflow import HOST

    durable = make(ambiguous_loop())
    durable.run("find w", run_id="dropped-here")
    durable.runs.cancel("dropped-here")
    assert durable.status("dropped-here").status == "cancelled"
    for _ in range(400):  # the run's thread stops looking for an answer
        if "dropped-here" not in HOST.waiting:
            break
        time.sleep(0.01)
    assert "dropped-here" not in HOST.waiting
    with pytest.raises(AnswerRefused):
        durable.resume("dropped-here", Answer.tool("fast"), timeout=5)


def test_an_answer_to_a_question_the_run_went_on_from_is_refused_as_that_not_as_a_busy_run(make):
    """Bound to question 1 (as a page's form is), once the run has taken an answer to it and
    is running or has ended, it says the answer came too late for its question."""
    tools = [Tool("fast", {"search"}, Recorder("fast result")), Tool("slow", {"search"}, Recorder("slow result"))]
    durable = make(AgentLoop(tools, scripted(Intent({"search"}, {"q": "x"})), lambda o: True))
    durable.run("find x", run_id="went-on")
    assert durable.resume("went-on", Answer("tool", "fast", question=1), timeout=30).status == "finished"
    with pytest.raises(AnswerRefused, match=r"that answer was for question 1; the run no longer waits for it "
                                            r"\(it has had 1 answer and is finished\)"):
        durable.resume("went-on", Answer("tool", "slow", question=1))
