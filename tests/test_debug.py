import pytest
from builders import Recorder, intent, scripted_loop, tool

from forge import load_definition, write_trace
from forge.debug import AtStart, ReplaySession, SessionFinished


def loop_and_writer():
    reader = Recorder("text", "text")
    writer = Recorder("wrote")
    tools = [tool("read", handler=reader), tool("write", handler=writer, side_effect=True)]
    intents = [intent("read"), intent("write")]
    return scripted_loop(tools, intents, verify=lambda o: o.tool_name == "write"), reader, writer


def test_nothing_has_run_when_the_session_opens():
    loop, reader, _ = loop_and_writer()
    session = loop.debug("goal")
    assert session.state == "select"
    assert session.trace == () and not session.done and session.result is None
    assert reader.calls == []


def test_step_fires_exactly_one_transition():
    loop, _, _ = loop_and_writer()
    session = loop.debug("goal")
    record = session.step()
    assert (record.source, record.dest, session.state) == ("select", "execute", "execute")
    assert session.trace == (record,)


def test_continue_stops_at_a_state_breakpoint():
    loop, _, _ = loop_and_writer()
    session = loop.debug("goal")
    point = session.break_at("verify")
    outcome = session.continue_()
    assert outcome.hit == point and session.state == "verify"
    assert [r.dest for r in outcome.fired] == ["execute", "observe", "verify"]


def test_breakpoints_persist_until_removed():
    loop, _, _ = loop_and_writer()
    session = loop.debug("goal")
    point = session.break_at("verify")
    session.continue_()
    session.continue_()
    assert session.state == "verify" and session.step_number == 2
    session.remove_breakpoint(point)
    assert session.breakpoints == ()
    session.continue_()
    assert session.done


def test_trigger_and_predicate_breakpoints():
    loop, _, _ = loop_and_writer()
    session = loop.debug("goal")
    session.break_at(trigger="replan")
    assert session.continue_().fired[-1].trigger == "replan"
    session.clear_breakpoints()
    session.break_at(when=lambda record, s: record.detail.get("tool") == "write" and record.source == "execute")
    assert session.continue_().fired[-1].detail["tool"] == "write"


def test_breakpoints_are_listed():
    loop, _, _ = loop_and_writer()
    session = loop.debug("goal")
    a, b = session.break_at("observe"), session.break_at(trigger="stop")
    assert session.breakpoints == (a, b)
    assert [str(p) for p in session.breakpoints] == ["#1 state observe", "#2 trigger stop"]


def test_unknown_breakpoint_targets_are_refused():
    session = loop_and_writer()[0].debug("goal")
    with pytest.raises(ValueError, match="unknown state 'nowhere'"):
        session.break_at("nowhere")
    with pytest.raises(ValueError, match="unknown trigger"):
        session.break_at(trigger="jump")
    with pytest.raises(ValueError, match="exactly one"):
        session.break_at()


def test_back_restores_state_observations_and_counters():
    loop, _, _ = loop_and_writer()
    session = loop.debug("goal")
    session.break_at("select")
    session.continue_()
    before = (session.state, list(session.loop_state.observations), session.run.step)
    session.step(), session.step(), session.step()
    assert session.loop_state.step_count == 2
    session.back(), session.back(), session.back()
    assert (session.state, list(session.loop_state.observations), session.run.step) == before
    assert len(session.trace) == 4


def test_stepping_forward_again_replays_without_executing_tools():
    loop, reader, writer = loop_and_writer()
    session = loop.debug("goal")
    while not session.done:
        session.step()
    first = session.trace
    while session.trace:
        session.back()
    assert session.state == "select" and session.loop_state.step_count == 0
    while not session.done:
        session.step()
    assert session.trace == first
    assert (len(reader.calls), len(writer.calls)) == (1, 1)
    assert session.result.side_effects_run == 1 and session.result.side_effects_replayed == 0


def test_stepping_a_finished_session_raises():
    loop, _, _ = loop_and_writer()
    session = loop.debug("goal")
    while not session.done:
        session.step()
    with pytest.raises(SessionFinished, match="verified_success"):
        session.step()
    with pytest.raises(SessionFinished):
        session.continue_()


def test_back_at_the_start_raises():
    with pytest.raises(AtStart):
        loop_and_writer()[0].debug("goal").back()


def test_debugged_run_and_plain_run_produce_the_same_trace():
    debugged, _, _ = loop_and_writer()
    session = debugged.debug("goal")
    session.break_at("observe")
    while not session.done:
        session.continue_()
        if session.state == "observe":
            session.back()
            session.step()
    plain, _, _ = loop_and_writer()
    assert session.trace == plain.run("goal").trace
    assert session.result.reason == "verified_success"


def test_diagram_marks_the_current_state_and_path():
    session = loop_and_writer()[0].debug("goal")
    session.step(), session.step()
    source = session.diagram().source
    assert "run is here" in source and "now in observe" in source


def test_replay_steps_forwards_and_backwards_without_executing(tmp_path):
    loop, reader, _ = loop_and_writer()
    trace = loop.run("goal").trace
    path = write_trace(trace, tmp_path / "run.jsonl")
    from forge import read_trace

    replay = ReplaySession(load_definition(), read_trace(path))
    replay.break_at("verify")
    replay.continue_()
    assert replay.state == "verify" and [o.tool_name for o in replay.observations] == ["read"]
    replay.back()
    assert replay.state == "observe"
    while not replay.done:
        replay.step()
    assert replay.trace == trace and replay.state == "verified_success"
    assert len(reader.calls) == 1


def test_ctrl_c_stops_continue_at_the_transition_it_was_in_with_the_session_intact():
    from builders import intent, scripted_loop, tool

    calls = []

    def slow(**kwargs):
        calls.append(kwargs)
        if len(calls) == 2:
            raise KeyboardInterrupt  # as Ctrl-C would, inside the second tool call
        return "ok"

    loop = scripted_loop([tool("a", handler=slow)], [intent("a")] * 3, verify=lambda o: o.sequence == 2)
    session = loop.debug("goal")
    seen = []
    outcome = session.continue_(seen.append)
    assert outcome.interrupted and outcome.hit is None
    assert [r.sequence for r in outcome.fired] == [1, 2, 3, 4, 5] == [r.sequence for r in seen]
    assert session.state == "execute" and len(session.trace) == 5 and session.loop_state.step_count == 1
    outcome = session.continue_()  # the interrupted transition runs again from where it was
    assert not outcome.interrupted and session.done and session.result.reason == "verified_success"
    assert len(calls) == 3


def test_continue_reports_each_transition_as_it_goes():
    from builders import intent, scripted_loop, tool

    session = scripted_loop([tool("a")], [intent("a")] * 2, verify=lambda o: o.sequence == 2).debug("goal")
    seen = []
    outcome = session.continue_(lambda record: seen.append((record.sequence, session.state)))
    assert seen == [(r.sequence, r.dest) for r in outcome.fired]
