"""forge eval: cases run as conversations, replayed from their cassettes or live, compared
with a baseline, written as results and a report, and gated on from the command line."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_evals")

from pydantic_evals import Case, Dataset

from forge import AgentLoop, Ask, Finish, Intent, LoopState, Tool
from forge.cli import main
from forge.errors import UsageError
from forge.evals import (
    CaseFailed,
    Conversation,
    EndState,
    EvalSettings,
    ToolCalls,
    compare,
    evaluate,
    load_dataset,
    read_results,
    run_case,
    write_results,
)
from forge.machine.diff import diff

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "evals"


class Counter:
    """A `lookup` tool whose calls are counted: a replay must make none."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def tool(self) -> Tool:
        def lookup(q: str) -> str:
            self.calls.append(q)
            return q.upper()

        return Tool("lookup", {"lookup"}, lookup, required={"q"})


def looks_up(*queries: str) -> Any:
    """A policy that looks each query up, one a step, then answers with what it found."""

    def policy(goal: str, state: LoopState) -> Any:
        done = [o for o in state.observations if o.tool_name == "lookup"]
        if len(done) < len(queries):
            return Intent.call("lookup", q=queries[len(done)])
        return Finish(" ".join(str(o.payload) for o in done))

    return policy


def loop_of(counter: Counter, policy: Any, **options: Any) -> AgentLoop:
    return AgentLoop([counter.tool()], policy, verify=lambda o: o.tool_name == "finish", **options)


def recorded(tmp_path: Path, policy: Any, inputs: Any = "find a and b", name: str = "case") -> Path:
    run_case(loop_of(Counter(), policy), name, inputs, EvalSettings(tmp_path, record=True))
    return tmp_path


# the runner


def test_a_recorded_case_replays_calling_nothing(tmp_path: Path) -> None:
    recorded(tmp_path, looks_up("a", "b"))
    counter = Counter()
    run = run_case(loop_of(counter, looks_up("a", "b")), "case", "find a and b", EvalSettings(tmp_path, offline=True))
    assert (run.reason, run.answer, run.modes) == ("verified_success", "A B", ("replayed",))
    assert counter.calls == []


def test_a_case_that_departs_from_its_cassette_goes_live_from_the_diverging_transition(tmp_path: Path) -> None:
    recorded(tmp_path, looks_up("a", "b"))
    counter = Counter()
    run = run_case(loop_of(counter, looks_up("a", "c")), "case", "find a and b", EvalSettings(tmp_path))
    first = diff(tmp_path / "case" / "turn-1.jsonl", run.last).first
    assert run.modes == (f"departed at {first}",)
    assert counter.calls == ["c"]  # "a" was replayed, "c" made live
    assert run.answer == "A C"


def test_offline_a_departure_fails_the_case_naming_the_miss(tmp_path: Path) -> None:
    recorded(tmp_path, looks_up("a", "b"))
    with pytest.raises(CaseFailed, match=r"turn 1, departs from its cassette .*journal miss: the policy decided"):
        run_case(loop_of(Counter(), looks_up("a", "c")), "case", "find a and b", EvalSettings(tmp_path, offline=True))


def test_offline_a_case_without_a_cassette_fails_saying_to_record_it(tmp_path: Path) -> None:
    with pytest.raises(CaseFailed, match="has no cassette .* record it with --record"):
        run_case(loop_of(Counter(), looks_up("a")), "case", "find a", EvalSettings(tmp_path, offline=True))


def test_recording_a_case_again_removes_its_old_turns(tmp_path: Path) -> None:
    asks = Conversation(goal="find it", replies=["a"])
    recorded(tmp_path, asking, asks)
    assert sorted(p.name for p in (tmp_path / "case").iterdir()) == ["turn-1.jsonl", "turn-2.jsonl"]
    recorded(tmp_path, looks_up("a"), "find a")
    assert sorted(p.name for p in (tmp_path / "case").iterdir()) == ["turn-1.jsonl"]


def test_a_case_name_never_writes_outside_the_cassettes_folder(tmp_path: Path) -> None:
    recorded(tmp_path / "cassettes", looks_up("a"), "find a", name="../../escape")
    assert [p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("*.jsonl")] == ["cassettes/escape/turn-1.jsonl"]


def asking(goal: str, state: LoopState) -> Any:
    """Asks what to look up, then for a second thing, then answers with both."""
    replies = [o for o in state.observations if o.tool_name == "ask_user"]
    found = [o for o in state.observations if o.tool_name == "lookup"]
    if len(found) < len(replies):
        return Intent.call("lookup", q=goal)
    if len(replies) < 2:
        return Ask("What should I look up?" if not replies else "And what else?")
    return Finish(" ".join(str(o.payload) for o in found))


def test_scripted_replies_answer_the_agents_questions_in_order() -> None:
    counter = Counter()
    run = run_case(loop_of(counter, asking), "case", Conversation(goal="look things up", replies=["a", "b"]))
    assert [turn.reason for turn in run.turns] == ["input_required", "input_required", "verified_success"]
    assert counter.calls == ["a", "b"]
    assert (run.answer, run.replies_used) == ("A B", 2)


def test_a_conversation_ends_when_the_script_has_no_more_replies() -> None:
    run = run_case(loop_of(Counter(), asking), "case", Conversation(goal="look things up", replies=["a"]))
    assert [turn.reason for turn in run.turns] == ["input_required", "input_required"]


def test_a_reply_after_an_answer_is_the_users_next_request() -> None:
    def answers(goal: str, state: LoopState) -> Any:  # each turn: looks its goal up, answers with it
        last = state.observations[-1] if state.observations else None
        if last is not None and last.tool_name == "lookup" and last.payload == goal.upper():
            return Finish(last.payload)
        return Intent.call("lookup", q=goal)

    counter = Counter()
    run = run_case(loop_of(counter, answers), "case", Conversation(goal="x", replies=["y"]))
    assert [turn.answer for turn in run.turns] == ["X", "Y"]
    assert counter.calls == ["x", "y"]


def writes(goal: str, state: LoopState) -> Any:
    return Intent.call("write", text=goal) if not state.observations or \
        state.observations[-1].status != "ok" else Finish("written")


def writer_loop(written: list[str]) -> AgentLoop:
    tool = Tool("write", {"write"}, lambda text: written.append(text), required={"text"}, side_effect=True)
    return AgentLoop([tool], writes, verify=lambda o: o.tool_name == "finish", definition="approval",
                     approver=lambda request: True, max_steps=6)


def test_approvals_answer_the_approval_requests_in_order() -> None:
    written: list[str] = []
    run = run_case(writer_loop(written), "case", Conversation(goal="note", approvals=[False, True]))
    assert (run.reason, written, run.approvals_used) == ("verified_success", ["note"], 2)


def test_an_approval_request_past_the_scripted_answers_waits() -> None:
    written: list[str] = []
    run = run_case(writer_loop(written), "case", Conversation(goal="note", approvals=[False]))
    assert (run.reason, written) == ("approval_required", [])


def retries_with(suffix: str) -> Any:
    """Writes the goal; after a refusal, the goal with `suffix`."""

    def policy(goal: str, state: LoopState) -> Any:
        if not state.observations:
            return Intent.call("write", text=goal)
        return Finish("written") if state.observations[-1].status == "ok" else Intent.call("write", text=goal + suffix)

    return policy


def test_a_departed_turn_answers_each_approval_request_with_its_own_answer(tmp_path: Path) -> None:
    def loop_with(suffix: str, written: list[str]) -> AgentLoop:
        return writer_loop(written).replace(policy=retries_with(suffix))

    asks = Conversation(goal="note", approvals=[False, True])
    run_case(loop_with("1", []), "case", asks, EvalSettings(tmp_path, record=True))
    written: list[str] = []
    run = run_case(loop_with("2", written), "case", asks, EvalSettings(tmp_path))
    assert run.modes[0].startswith("departed at ")
    answered = [r.verdict for r in run.last.trace if r.verdict in ("approved", "rejected")]
    assert answered == ["rejected", "approved"]  # the second request got the second answer, not the first again
    assert (run.reason, written, run.approvals_used) == ("verified_success", ["note2"], 2)


def test_a_conversation_has_scripted_replies_or_a_model_user_not_both() -> None:
    with pytest.raises(ValueError, match="not both"):
        Conversation(goal="x", replies=["a"], user={"model": "m", "persona": "p"})


def test_each_case_gets_a_fresh_loop_from_the_factory_closed_after_it(tmp_path: Path) -> None:
    made: list[str] = []

    @contextmanager
    def factory() -> Iterator[AgentLoop]:
        made.append("open")
        yield loop_of(Counter(), looks_up("a"))
        made.append("closed")

    dataset = Dataset(name="d", cases=[Case(name="one", inputs="a"), Case(name="two", inputs="b")])
    evaluate(dataset, factory, max_concurrency=1)
    assert made == ["open", "closed", "open", "closed"]


def test_a_factory_that_makes_no_loop_is_refused_naming_what_it_made() -> None:
    dataset = Dataset(name="d", cases=[Case(name="one", inputs="a")])
    results = evaluate(dataset, lambda: "a loop")
    assert "returned a str" in str(results.cases[0].error)


def test_cases_run_concurrently_within_the_bound() -> None:
    """Each case's lookup waits for a second case's to run beside it (a barrier of two: a
    case run alone would wait forever), and counts how many run at once: never more than 2."""
    active, most = [0], [0]
    lock = threading.Lock()
    pairs = threading.Barrier(2, timeout=30)

    def slow(q: str) -> str:
        with lock:
            active[0] += 1
            most[0] = max(most[0], active[0])
        pairs.wait()
        with lock:
            active[0] -= 1
        return q

    loop = AgentLoop([Tool("lookup", {"lookup"}, slow, required={"q"})], looks_up("a"),
                     verify=lambda o: o.tool_name == "finish")
    dataset = Dataset(name="d", cases=[Case(name=f"c{n}", inputs="x") for n in range(4)])
    results = evaluate(dataset, loop, max_concurrency=2)
    assert most[0] == 2 and all(case.error is None for case in results.cases)


def test_a_dataset_case_without_a_name_is_refused_before_anything_runs() -> None:
    counter = Counter()
    with pytest.raises(UsageError, match="case 2 of dataset 'd' has no name"):
        evaluate(Dataset(name="d", cases=[Case(name="a", inputs="x"), Case(inputs="y")]), loop_of(counter, looks_up()))
    assert counter.calls == []


def test_a_case_of_the_wrong_inputs_is_refused_naming_it() -> None:
    with pytest.raises(UsageError, match="case 'a': .*a goal \\(a string\\) or a Conversation, got int"):
        evaluate(Dataset(name="d", cases=[Case(name="a", inputs=3)]), loop_of(Counter(), looks_up()))


def test_record_and_offline_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot be recorded offline"):
        EvalSettings(tmp_path, record=True, offline=True)


# a model-played user and a judge, on a chat server on 127.0.0.1, replayed from the tape


NOWHERE = "http://127.0.0.1:9/v1"  # nothing listens: a call that is not on the tape fails


def client_of(url: str) -> Any:
    """The openai client a model-played user or a judge speaks through; the test skips
    without the llm extra (only the tests that speak to a model need it)."""
    from models import REASON

    openai = pytest.importorskip("openai", reason=REASON)
    return openai.OpenAI(base_url=url, api_key="test", max_retries=0)


def test_a_model_played_user_replies_until_it_says_done(tmp_path: Path) -> None:
    from tests.chat_server import ChatServer, reply

    user = Conversation(goal="look things up", user={"model": "user-model", "persona": "wants a and b looked up"})
    with ChatServer([reply("a"), reply("b"), reply("DONE")]) as server:
        run = run_case(loop_of(Counter(), asking), "case", user,
                       EvalSettings(tmp_path, record=True, client=client_of(server.url)))
        first = server.requests[0]
    assert [turn.reason for turn in run.turns] == ["input_required", "input_required", "verified_success"]
    assert (run.answer, run.replies_used) == ("A B", 2)
    assert [m["role"] for m in first["messages"]] == ["system", "assistant", "user"]  # the model plays the user
    assert first["messages"][1:] == [{"role": "assistant", "content": "look things up"},
                                     {"role": "user", "content": "What should I look up?"}]
    assert "wants a and b looked up" in first["messages"][0]["content"]


def test_a_simulated_conversation_replays_from_its_tape_offline(tmp_path: Path) -> None:
    from forge.evals.runner import TAPE
    from tests.chat_server import ChatServer, reply

    user = Conversation(goal="look things up", user={"model": "user-model", "persona": "wants a and b"})
    with ChatServer([reply("a"), reply("b"), reply("DONE")]) as server:
        live = run_case(loop_of(Counter(), asking), "case", user,
                        EvalSettings(tmp_path, record=True, client=client_of(server.url)))
    live.models.tape.save(tmp_path / "case" / TAPE)
    counter = Counter()
    again = run_case(loop_of(counter, asking), "case", user,
                     EvalSettings(tmp_path, offline=True, client=client_of(NOWHERE)))
    assert [turn.trace for turn in again.turns] == [turn.trace for turn in live.turns]
    assert (again.modes, counter.calls, again.models.tape.live) == (("replayed",) * 3, [], 0)


def judged(rubric: str) -> Dataset[Any, Any, Any]:
    from forge.evals import Judge

    return Dataset(name="judged", cases=[Case(name="case", inputs="find a and b",
                                              evaluators=(Judge(rubric, model="judge-model"),))])


def test_a_judge_passes_an_answer_with_its_reason_and_replays_it_offline(tmp_path: Path) -> None:
    from tests.chat_server import ChatServer, reply

    with ChatServer([reply('{"pass": true, "reason": "it names both"}')]) as server:
        live = evaluate(judged("names a and b"), loop_of(Counter(), looks_up("a", "b")), cassettes=tmp_path,
                        record=True, client=client_of(server.url))
        sent = server.requests[0]
    assert live.cases[0].assertions == {"Judge": True}
    assert live.cases[0].reasons["Judge"] == "it names both"
    assert sent["response_format"]["type"] == "json_schema"
    assert "Answer: A B" in sent["messages"][1]["content"] and "Rubric: names a and b" in sent["messages"][1]["content"]
    offline = evaluate(judged("names a and b"), loop_of(Counter(), looks_up("a", "b")), cassettes=tmp_path,
                       offline=True, client=client_of(NOWHERE))
    assert (offline.cases[0].assertions, offline.cases[0].reasons) == (live.cases[0].assertions, live.cases[0].reasons)
    assert offline.runs["case"].models.tape.live == 0


def test_a_changed_rubric_offline_is_a_judge_call_not_on_the_tape(tmp_path: Path) -> None:
    from tests.chat_server import ChatServer, reply

    with ChatServer([reply('{"pass": true, "reason": "fine"}')]) as server:
        evaluate(judged("names a and b"), loop_of(Counter(), looks_up("a", "b")), cassettes=tmp_path, record=True,
                 client=client_of(server.url))
    offline = evaluate(judged("names b first"), loop_of(Counter(), looks_up("a", "b")), cassettes=tmp_path,
                       offline=True, client=client_of(NOWHERE))
    assert offline.cases[0].error == ("Judge: TapeMiss: a judge model call is not on the case's tape (the recorded request "
                                      "differs at messages[1].content); record the case again with --record")


def test_a_judge_fails_an_answer_with_its_reason(tmp_path: Path) -> None:
    from tests.chat_server import ChatServer, reply

    with ChatServer([reply('{"pass": false, "reason": "it leaves out c"}')]) as server:
        results = evaluate(judged("names a, b and c"), loop_of(Counter(), looks_up("a", "b")),
                           client=client_of(server.url))
    assert (results.cases[0].assertions, results.cases[0].reasons) == ({"Judge": False}, {"Judge": "it leaves out c"})
    assert results.cases[0].score == 0.0


def test_a_judge_reply_that_is_no_verdict_is_an_error_naming_it(tmp_path: Path) -> None:
    from tests.chat_server import ChatServer, reply

    with ChatServer([reply("yes, looks good")]) as server:
        results = evaluate(judged("names a and b"), loop_of(Counter(), looks_up("a", "b")),
                           client=client_of(server.url))
    assert "the judge's reply is not a verdict" in str(results.cases[0].error)
    assert results.cases[0].score == 0.0


# results, comparison and report


def dataset_of(**cases: Any) -> Dataset[Any, Any, Any]:
    return Dataset(name="lookups", cases=[Case(name=name, inputs=goal, evaluators=(EndState("verified_success"),
                                                                                  ToolCalls(["lookup"])))
                                          for name, goal in cases.items()])


def test_a_case_scores_the_mean_of_its_scores_and_assertions() -> None:
    results = evaluate(dataset_of(ok="a", gap="b"), loop_of(Counter(), lambda goal, state: (
        looks_up("a")(goal, state) if goal == "a" else Intent.call("nothing", q="x"))))
    assert [(case.name, case.score, case.reason) for case in results.cases] == [
        ("ok", 1.0, "verified_success"), ("gap", 0.0, "capability_gap")]
    assert results.score == 0.5


def test_results_written_are_read_back_equal_with_replayable_runs(tmp_path: Path) -> None:
    results = write_results(evaluate(dataset_of(one="a"), loop_of(Counter(), looks_up("a"))), tmp_path / "out")
    again = read_results(tmp_path / "out" / "results.json")
    assert again.cases == results.cases
    run_file = tmp_path / "out" / again.cases[0].runs[0]
    counter = Counter()
    assert loop_of(counter, looks_up("a")).replay(run_file).answer == "A"
    assert counter.calls == []
    assert run_file.with_suffix(".html").read_text().startswith("<!doctype html>")


def test_a_file_that_is_not_results_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "other.json").write_text('{"cases": 3}')
    with pytest.raises(UsageError, match="other.json is not forge eval results of version 1"):
        read_results(tmp_path / "other.json")


def test_compare_names_the_regressions_and_where_the_runs_diverge(tmp_path: Path) -> None:
    before = write_results(evaluate(dataset_of(same="x", worse="y"), loop_of(Counter(), looks_up("a"))),
                           tmp_path / "before")

    def broken(goal: str, state: LoopState) -> Any:
        return looks_up("a")(goal, state) if goal == "x" else Intent.call("nothing", q="x")

    after = evaluate(dataset_of(same="x", worse="y"), loop_of(Counter(), broken))
    comparison = compare(after, read_results(tmp_path / "before"))
    same, worse = comparison.changes
    assert (same.changed, same.regressed) == (False, False)
    assert worse.regressions == (
        "score fell from 1.00 to 0.00",
        "EndState no longer holds: ended in capability_gap (needs_input); expected reason verified_success",
        "ended in capability_gap, not verified_success")
    at = diff(tmp_path / "before" / before.cases[1].runs[0], after.runs["worse"].last).first
    assert (worse.divergence.turn, worse.divergence.transition) == (1, at)
    assert str(worse.divergence).startswith(f"turn 1, transition {at}: state ")


def test_one_case_up_and_another_down_is_a_regression_though_the_total_score_holds(tmp_path: Path) -> None:
    """The gate is per case: a case that fell is a regression whatever the others did, so a
    total that holds (one up, one down) never hides it."""
    def good_at(wanted: str) -> Any:
        def policy(goal: str, state: LoopState) -> Any:
            return looks_up("a")(goal, state) if goal == wanted else Intent.call("nothing", q="x")
        return policy

    write_results(evaluate(dataset_of(up="x", down="y"), loop_of(Counter(), good_at("y"))), tmp_path / "before")
    after = evaluate(dataset_of(up="x", down="y"), loop_of(Counter(), good_at("x")))
    comparison = compare(after, read_results(tmp_path / "before"))
    assert comparison.scores[0] == pytest.approx(comparison.scores[1])  # the total holds
    assert [change.name for change in comparison.regressions] == ["down"]
    assert comparison.regressions[0].regressions[0] == "score fell from 1.00 to 0.00"


def test_the_report_shows_every_case_links_its_runs_and_marks_regressions(tmp_path: Path) -> None:
    before = write_results(evaluate(dataset_of(worse="y"), loop_of(Counter(), looks_up("a"))), tmp_path / "before")
    after = evaluate(dataset_of(worse="y"), loop_of(Counter(), lambda goal, state: Intent.call("nothing", q="x")))
    write_results(after, tmp_path / "after", compare(after, before))
    page = (tmp_path / "after" / "report.html").read_text()
    assert "<tr class=regressed><td><b>worse</b>" in page
    assert "1.00 → 0.00" in page and "verified_success → capability_gap" in page
    assert "href='runs/worse/turn-1.html'" in page and (tmp_path / "after" / "runs/worse/turn-1.html").exists()


# the command line, on the example in examples/evals


def forge_eval(*arguments: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["eval", str(EXAMPLE / "workspace.yaml"), *arguments])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_the_example_eval_passes_offline_from_its_committed_cassettes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = forge_eval("--loop", f"{EXAMPLE / 'workspace_agent.py'}:make_loop", "--offline", "--min-score", "1",
                           capsys=capsys)
    assert code == 0, out
    assert "workspace: score 1.00; 5 of 5 cases passed" in out


def test_a_broken_agent_fails_no_regressions_naming_the_cases_and_diverging_transitions(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    agent = EXAMPLE / "workspace_agent.py"
    assert forge_eval("--loop", f"{agent}:make_loop", "--offline", "--out", str(tmp_path / "base"),
                      capsys=capsys)[0] == 0
    code, out = forge_eval("--loop", f"{agent}:make_broken_loop", "--against", str(tmp_path / "base"),
                           "--no-regressions", "--out", str(tmp_path / "broken"), capsys=capsys)
    assert code == 1
    assert "FAILED: 3 cases regressed: index, index-in-a-folder, asks-where" in out
    assert "index: score 1.00 → 0.79, ended in verified_success → repeated_action; diverges at turn 1, " \
           "transition 16: detail.tool read_note → analyse" in out
    assert "asks-where: score 1.00 → 0.80, ended in verified_success → repeated_action; diverges at turn 2, " \
           "transition 16" in out
    results = json.loads((tmp_path / "broken" / "results.json").read_text())
    assert results["cases"][0]["modes"] == ["departed at 16"]


def test_a_case_that_cannot_run_offline_is_told_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Once, in forge's summary, not again in the report's own failures table (issue 54 item 6)."""
    import shutil

    cassettes = tmp_path / "cassettes"
    shutil.copytree(EXAMPLE / "cassettes" / "workspace", cassettes)
    shutil.rmtree(cassettes / "index")
    code, out = forge_eval("--loop", f"{EXAMPLE / 'workspace_agent.py'}:make_loop", "--offline", "--cassettes",
                           str(cassettes), "--min-score", "1", capsys=capsys)
    assert code == 1 and "4 of 5 cases passed" in out
    assert out.count("has no cassette") == 1, out


def test_min_score_fails_the_command_when_the_score_is_below_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = forge_eval("--loop", f"{EXAMPLE / 'workspace_agent.py'}:make_broken_loop", "--min-score", "0.9",
                           capsys=capsys)
    assert code == 1
    assert "FAILED: score 0.87 is below --min-score 0.90" in out


def test_no_regressions_without_a_baseline_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, out = forge_eval("--loop", "x:y", "--no-regressions", capsys=capsys)
    assert code == 2
    assert "--no-regressions compares with a baseline: give --against BASELINE" in out


def test_a_missing_dataset_is_refused_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["eval", str(tmp_path / "none.yaml"), "--loop", "x:y"])
    assert code == 2
    assert f"no dataset file at {tmp_path / 'none.yaml'}" in capsys.readouterr().err


@pytest.mark.parametrize(("text", "why"), [
    ("name: d\ncases: [\n  - {name: a\n", "expected the node content"),
    ("name: d\x00\ncases: []\n", "unacceptable character #x0000"),
])
def test_a_dataset_that_is_not_yaml_is_refused_in_one_line_naming_the_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, why: str) -> None:
    (tmp_path / "d.yaml").write_text(text)
    code = main(["eval", str(tmp_path / "d.yaml"), "--loop", "x:y"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert f"{tmp_path / 'd.yaml'} is not valid YAML: " in err and why in err


def test_a_dataset_naming_an_unknown_scorer_is_refused(tmp_path: Path) -> None:
    (tmp_path / "d.yaml").write_text("name: d\ncases:\n- name: a\n  inputs: x\n  evaluators: [Politeness]\n")
    with pytest.raises(UsageError, match="d.yaml is not a forge eval dataset: .*Politeness"):
        load_dataset(tmp_path / "d.yaml")


def test_a_tape_line_that_is_no_call_is_refused_naming_the_line(tmp_path: Path) -> None:
    from forge.evals import ModelTape

    (tmp_path / "calls.jsonl").write_text('{"kind": "judge", "request": {}, "reply": {}}\n{"kind": "judge"}\n')
    with pytest.raises(UsageError, match=r"calls.jsonl:2: a tape line has kind, request and reply"):
        ModelTape.read(tmp_path / "calls.jsonl")
