"""A child run's journal is part of its parent's (issue 34, item 1): written in the
parent's trace file and cassette, read back one run at a time, and forked at a transition
inside the child with nothing called before it, in the parent or the child."""

from __future__ import annotations

import json

import pytest

from forge import AgentLoop, Finish, Intent, Patch, tool
from forge.machine.fork import PatchRefused, read_recorded
from forge.policy import FINISH
from forge.records.trace import child_headers, read_journal, read_trace, write_trace

CALLS: list[str] = []


def finished(observation) -> bool:
    return observation.tool_name == FINISH


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    CALLS.append(f"lookup {topic}")
    return f"facts about {topic}"


@tool
def summarise(text: str) -> str:
    """Make a text short."""
    CALLS.append("summarise")
    return text.upper()


def research_policy(goal, state):
    CALLS.append(f"research policy {len(state.observations)}")
    seen = state.observations
    if not seen:
        return Intent.call("lookup", topic=goal)
    if len(seen) == 1:
        return Intent.call("summarise", text=str(seen[0].payload))
    return Finish(f"notes: {seen[-1].payload}")


def writing(goal, state):
    CALLS.append(f"writer policy {len(state.observations)}")
    topics = ["otters", "seals"]
    seen = state.observations
    if len(seen) < len(topics):
        return Intent.call("research", goal=topics[len(seen)])
    return Finish(" / ".join(str(o.payload) for o in seen))


researcher = AgentLoop([lookup, summarise], research_policy, finished)
writer = AgentLoop([researcher.as_tool("research")], writing, finished)


@pytest.fixture(autouse=True)
def no_calls():
    CALLS.clear()


@pytest.fixture
def recorded():
    result = writer.run("write", run_id="w")
    CALLS.clear()
    return result


def lines_of(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_trace_file_holds_each_child_run_after_a_header_naming_its_parent_tool_and_transition(recorded, tmp_path):
    path = write_trace(recorded.trace, tmp_path / "run.jsonl", journal=recorded.journal)
    headers = [line for line in lines_of(path) if line.get("type") == "child"]
    assert [(h["run_id"], h["parent"], h["tool"], h["transition"]) for h in headers] == [
        ("w/research.1", "w", "research", recorded.children[0].transition),
        ("w/research.2", "w", "research", recorded.children[1].transition),
    ]


def test_a_child_runs_lines_stand_before_the_parents_call_that_ran_it(recorded, tmp_path):
    path = write_trace(recorded.trace, tmp_path / "run.jsonl", journal=recorded.journal)
    lines = lines_of(path)
    header = next(i for i, line in enumerate(lines) if line.get("run_id") == "w/research.1")
    parent_call = next(i for i, line in enumerate(lines)
                       if line.get("type") == "call" and line["run_id"] == "w" and line["name"] == "research")
    child_lines = [i for i, line in enumerate(lines) if line.get("run_id") == "w/research.1"]
    assert header < parent_call and max(child_lines) < parent_call


def test_reading_a_file_with_children_reads_the_parents_run_as_before(recorded, tmp_path):
    path = write_trace(recorded.trace, tmp_path / "run.jsonl", journal=recorded.journal)
    assert list(read_trace(path)) == list(recorded.trace)
    assert [e.run_id for e in read_journal(path)] == ["w"] * len(recorded.journal)


def test_a_child_run_is_read_from_its_parents_file_by_its_path(recorded, tmp_path):
    path = write_trace(recorded.trace, tmp_path / "run.jsonl", journal=recorded.journal)
    child = recorded.children[1].result
    assert list(read_trace(path, run="research.2")) == list(child.trace)
    assert list(read_trace(path, run="w/research.2")) == list(child.trace)
    assert len(read_journal(path, run="research.2")) == len(child.journal)


def test_reading_a_child_the_file_lacks_names_the_ones_it_holds(recorded, tmp_path):
    path = write_trace(recorded.trace, tmp_path / "run.jsonl", journal=recorded.journal)
    with pytest.raises(ValueError, match=r"no child run 'research\.3'; it holds: research\.1, research\.2"):
        read_trace(path, run="research.3")


def test_a_grandchilds_lines_nest_inside_its_parents_block(tmp_path):
    middle = AgentLoop([researcher.as_tool("research")],
                       lambda goal, state: Intent.call("research", goal=goal) if not state.observations
                       else Finish(state.observations[-1].payload), finished)
    top = AgentLoop([middle.as_tool("delegate")],
                    lambda goal, state: Intent.call("delegate", goal=goal) if not state.observations
                    else Finish(state.observations[-1].payload), finished)
    result = top.run("otters", run_id="t")
    path = write_trace(result.trace, tmp_path / "run.jsonl", journal=result.journal)
    assert [h["run_id"] for h in child_headers(path)] == ["t/delegate.1", "t/delegate.1/research.1"]
    assert list(read_trace(path, run="delegate.1/research.1")) == list(result.children[0].result.children[0].result.trace)
    assert read_recorded(path).children[0].result.children[0].path == "t/delegate.1/research.1"


def test_a_parent_replayed_from_its_file_calls_no_child(recorded, tmp_path):
    path = write_trace(recorded.trace, tmp_path / "run.jsonl", journal=recorded.journal)
    replayed = writer.replay(path)
    assert [call for call in CALLS if not call.startswith(("writer policy", "research policy"))] == []
    assert replayed.answer == recorded.answer


def summarised_at(child) -> int:
    """The child's transition that called summarise."""
    return next(r.sequence for r in child.result.trace if r.source == "execute" and r.detail.get("tool") == "summarise")


def test_a_fork_at_a_child_transition_calls_nothing_before_it(recorded):
    fork = writer.fork(recorded, summarised_at(recorded.children[1]), Patch.tool_result("SEALS, REWRITTEN"), child="research.2")
    world = [call for call in CALLS if not call.startswith(("writer policy", "research policy"))]
    assert world == []
    assert fork.answer == "notes: FACTS ABOUT OTTERS / notes: SEALS, REWRITTEN"


def test_a_fork_in_a_child_keeps_the_childs_run_before_the_fork_and_marks_its_origin(recorded):
    at = summarised_at(recorded.children[1])
    fork = writer.fork(recorded, at, Patch.tool_result("patched"), child="research.2", run_id="f")
    assert [child.path for child in fork.children] == ["w/research.1", "f/research.2"]  # the first one replayed
    child = fork.children[1]
    assert child.result.journal.forked_from.run_id == "w/research.2"
    assert child.result.journal.forked_from.transition == at
    assert list(child.result.trace)[:at - 1] == list(recorded.children[1].result.trace)[:at - 1]


def test_a_fork_in_a_child_from_its_parents_file_calls_nothing_before_it(recorded, tmp_path):
    path = write_trace(recorded.trace, tmp_path / "run.jsonl", journal=recorded.journal)
    fork = writer.fork(path, summarised_at(recorded.children[0]), Patch.tool_result("from the file"),
                       child="research.1")
    assert [call for call in CALLS if not call.startswith(("writer policy", "research policy"))] == ["lookup seals",
                                                                                                      "summarise"]
    assert fork.answer.startswith("notes: from the file / ")


def test_a_fork_in_a_child_the_run_lacks_is_refused_before_anything_runs(recorded):
    with pytest.raises(PatchRefused, match=r"no child run 'research\.9'; its child runs are: research\.1, research\.2"):
        writer.fork(recorded, 2, None, child="research.9")
    assert CALLS == []


def test_a_patch_that_does_not_fit_the_childs_transition_is_refused_before_anything_runs(recorded):
    with pytest.raises(PatchRefused, match="transition 99"):
        writer.fork(recorded, 99, Patch.tool_result("x"), child="research.1")
    assert CALLS == []


def test_a_replayed_parent_keeps_the_recorded_child_runs(recorded, tmp_path):
    path = write_trace(recorded.trace, tmp_path / "run.jsonl", journal=recorded.journal)
    in_memory, from_file = writer.replay(recorded.journal), writer.replay(path)
    assert [c.path for c in in_memory.children] == [c.path for c in from_file.children] == ["w/research.1",
                                                                                             "w/research.2"]
    assert list(from_file.children[1].result.trace) == list(recorded.children[1].result.trace)


def test_a_fork_of_the_parent_numbers_a_live_child_after_the_replayed_ones(recorded):
    fork = writer.fork(recorded, recorded.children[1].transition, run_id="f")
    assert [c.path for c in fork.children] == ["w/research.1", "f/research.2"]
    assert CALLS.count("lookup seals") == 1 and "lookup otters" not in CALLS


def test_a_fork_in_a_grandchild_calls_nothing_before_it(tmp_path):
    def delegating(goal, state):
        return Intent.call("research", goal=goal) if not state.observations else Finish(state.observations[-1].payload)

    middle = AgentLoop([researcher.as_tool("research")], delegating, finished)
    top = AgentLoop([middle.as_tool("delegate")],
                    lambda goal, state: Intent.call("delegate", goal=goal) if not state.observations
                    else Finish(state.observations[-1].payload), finished)
    result = top.run("otters", run_id="t")
    path = write_trace(result.trace, tmp_path / "run.jsonl", journal=result.journal)
    CALLS.clear()
    at = summarised_at(result.children[0].result.children[0])
    fork = top.fork(path, at, Patch.tool_result("deep"), child="delegate.1/research.1")
    assert [call for call in CALLS if not call.startswith(("writer policy", "research policy"))] == []
    assert fork.answer == "notes: deep"
    assert fork.children[0].result.children[0].result.journal.forked_from.transition == at


def test_a_cassette_holds_the_child_runs_and_replays_without_calling_them(recorded, tmp_path):
    from forge.machine.cassette import write_cassette

    path = write_cassette(tmp_path / "c.jsonl", recorded)
    assert [h["run_id"] for h in child_headers(path)] == ["w/research.1", "w/research.2"]
    assert all(line.get("duration_s", 0) == 0 for line in lines_of(path))
    replayed = writer.replay(path)
    assert replayed.answer == recorded.answer
    assert not [call for call in CALLS if not call.startswith(("writer policy", "research policy"))]


def test_a_diff_sets_child_runs_side_by_side_and_names_the_child_transition(recorded, tmp_path):
    from forge.machine.diff import diff

    at = summarised_at(recorded.children[1])
    fork = writer.fork(recorded, at, Patch.tool_result("other"), child="research.2")
    found = diff(recorded, fork)
    assert found.first == recorded.children[1].transition
    inside = [d for d in found.differences if d.run == "research.2"]
    assert inside[0].transition == at and inside[0].what == "outcome" and inside[0].where == f"research.2:{at}"
    assert f"research.2:{at}" in str(found)


def test_a_diff_of_two_files_compares_their_child_runs(recorded, tmp_path):
    from forge.machine.diff import diff

    fork = writer.fork(recorded, summarised_at(recorded.children[0]), Patch.tool_result("other"), child="research.1")
    a = write_trace(recorded.trace, tmp_path / "a.jsonl", journal=recorded.journal)
    b = write_trace(fork.trace, tmp_path / "b.jsonl", journal=fork.journal)
    assert [d.run for d in diff(a, b).differences if d.run] == [d.run for d in diff(recorded, fork).differences if d.run]
    assert diff(a, a).equal
