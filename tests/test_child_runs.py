"""Loops calling loops (issue 34, item 1): `loop.as_tool(...)` runs a loop as a child run of
the run that calls it: its path as run id, the parent's steps left as its budget, its usage
rolled up, its result kept with the parent's, its failure a tool error of the parent."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from forge import AgentLoop, Finish, Intent, Limits, RunStart, tool
from forge.machine.child import LoopCycle, children_of
from forge.policy import FINISH


def finished(observation) -> bool:
    return observation.tool_name == FINISH


CALLS: list[str] = []


@tool
def lookup(topic: str) -> str:
    """Look a topic up."""
    CALLS.append(topic)
    return f"facts about {topic}"


def research_policy(goal, state):
    if not state.observations:
        return Intent.call("lookup", topic=goal)
    return Finish(f"notes: {state.observations[-1].payload}")


def researcher(**options) -> AgentLoop:
    return AgentLoop([lookup], research_policy, finished, **options)


def asking(*goals: str):
    """A parent policy that asks the research tool each goal in turn, then finishes with
    what it heard."""
    def policy(goal, state):
        done = len(state.observations)
        if done < len(goals):
            return Intent.call("research", goal=goals[done])
        return Finish([str(o.payload) for o in state.observations])
    return policy


@pytest.fixture(autouse=True)
def no_calls():
    CALLS.clear()


def test_a_child_runs_answer_is_the_value_of_the_parents_tool_call():
    writer = AgentLoop([researcher().as_tool("research")], asking("otters"), finished)
    result = writer.run("write about otters")
    assert result.reason == "verified_success"
    assert result.answer == ["notes: facts about otters"]


def test_a_child_runs_records_carry_its_path_under_the_parents_run_id():
    writer = AgentLoop([researcher().as_tool("research")], asking("otters", "seals"), finished)
    result = writer.run("write", run_id="w")
    assert [child.path for child in result.children] == ["w/research.1", "w/research.2"]
    assert {record.run_id for record in result.children[1].result.trace} == {"w/research.2"}
    assert {record.run_id for record in result.trace} == {"w"}


def test_a_child_knows_the_parents_transition_and_tool_that_called_it():
    writer = AgentLoop([researcher().as_tool("research")], asking("otters"), finished)
    result = writer.run("write", run_id="w")
    child = result.children[0]
    assert child.tool == "research"
    called = result.trace[child.transition - 1]
    assert (called.source, called.trigger, called.detail["tool"]) == ("execute", "call", "research")


def test_a_child_of_a_child_has_the_path_of_both():
    middle = AgentLoop([researcher().as_tool("research")], asking("otters"), finished)
    top = AgentLoop([middle.as_tool("delegate")], lambda goal, state: Finish(state.observations[-1].payload)
                    if state.observations else Intent.call("delegate", goal="go"), finished)
    result = top.run("top", run_id="t")
    assert result.children[0].path == "t/delegate.1"
    assert result.children[0].result.children[0].path == "t/delegate.1/research.1"


def test_a_childs_step_budget_is_at_most_what_the_parent_has_left():
    def endless(goal, state):
        return Intent.call("lookup", topic=f"more {len(state.observations)}")

    child = AgentLoop([lookup], endless, finished, max_steps=50, limits=Limits(repeat_limit=100))
    writer = AgentLoop([child.as_tool("research")], asking("otters"), finished, max_steps=3)
    result = writer.run("write")
    assert result.children[0].result.reason == "step_budget_exhausted"
    assert result.children[0].result.steps == 3


def late_child_writer(asynchronous: bool = False) -> AgentLoop:
    """A parent of 6 steps that makes two lookups of its own first (steps 1 and 2), then
    calls a child that never finishes at step 3 (an `async def` policy's, `asynchronous`)."""
    def endless(goal, state):
        return Intent.call("lookup", topic=f"more {len(state.observations)}")

    async def endless_async(goal, state):
        return endless(goal, state)

    def parent(goal, state):
        done = len(state.observations)
        return Intent.call("lookup", topic=f"own {done}") if done < 2 else Intent.call("research", goal="otters")

    child = AgentLoop([lookup], endless_async if asynchronous else endless, finished, max_steps=50,
                      limits=Limits(repeat_limit=100))
    return AgentLoop([lookup, child.as_tool("research")], parent, finished, max_steps=6)


def test_a_child_called_late_has_only_the_steps_its_parent_has_left():
    """The child may take what is left, 6 - 2 = 4 steps, not the parent's 6."""
    result = late_child_writer().run("write")
    assert result.children[0].result.reason == "step_budget_exhausted"
    assert result.children[0].result.steps == 4


def test_under_arun_a_child_called_late_has_only_the_steps_its_parent_has_left():
    """As under `run` (the test above): an async child's budget is the parent's remainder.
    (From the mutation run: dropping the options `arun` passes its child survived.)"""
    result = asyncio.run(late_child_writer(asynchronous=True).arun("write"))
    assert result.children[0].result.reason == "step_budget_exhausted"
    assert result.children[0].result.steps == 4


def test_an_agent_tool_tells_the_model_which_agent_it_runs():
    child = AgentLoop([lookup], asking("otters"), finished)
    made = child.as_tool("research")
    assert made.description == f"run the agent 'research' ({child.definition.title or child.definition.name}) on a goal"
    assert child.as_tool("research", description="look things up").description == "look things up"


def test_a_child_that_fails_is_a_tool_error_of_the_parent_naming_its_reason():
    def endless(goal, state):
        return Intent.call("lookup", topic=f"more {len(state.observations)}")

    child = AgentLoop([lookup], endless, finished, max_steps=2, limits=Limits(repeat_limit=100))
    writer = AgentLoop([child.as_tool("research")], asking("otters"), finished)
    result = writer.run("write")
    seen = result.state.observations[0]
    assert seen.status == "retryable_error"
    assert "agent 'research' ended in step_budget_exhausted" in str(seen.payload)
    assert result.reason == "verified_success"  # the parent's policy heard of it and went on


def test_a_replay_of_the_parent_runs_no_child_and_calls_nothing():
    writer = AgentLoop([researcher().as_tool("research")], asking("otters"), finished)
    result = writer.run("write")
    assert CALLS == ["otters"]
    again = writer.replay(result.journal)
    assert CALLS == ["otters"]
    assert list(again.trace) == list(result.trace) and again.answer == result.answer


def test_the_childs_usage_rolls_up_into_the_parents():
    import openai
    from chat_server import ChatServer, reply

    from forge.models.chat import ChatPolicy

    answer = reply("the notes")
    answer["_usage"] = {"prompt_tokens": 30, "completion_tokens": 7}
    with ChatServer([answer]) as server:
        model = ChatPolicy("test-model", client=openai.OpenAI(base_url=server.url, api_key="k", max_retries=0))
        child = AgentLoop([lookup], model, finished)
        writer = AgentLoop([child.as_tool("research")], asking("otters"), finished)
        result = writer.run("write")
    assert result.children[0].result.usage.total_tokens == 37
    assert result.usage.total_tokens == 37 and len(result.usage.calls) == 1


def test_a_loop_that_would_call_itself_is_refused_before_its_child_runs():
    from forge import Tool

    inner: dict[str, Tool] = {}

    def again(goal: str) -> str:
        """Ask this very loop again, through its own as_tool."""
        return inner["tool"].handler(goal=goal)

    looping = AgentLoop([Tool.from_function(again), lookup], lambda goal, state: Intent.call("again", goal="x"),
                        finished)
    inner["tool"] = looping.as_tool("inner")
    result = looping.run("go", run_id="c")
    assert result.reason == "fatal_error" and isinstance(result.error, LoopCycle)
    assert "would run loop 'single_agent' inside itself (c)" in str(result.error)
    assert CALLS == []


def test_a_loop_calling_itself_through_another_is_refused_with_the_path():
    from forge import Tool

    inner: dict[str, Tool] = {}

    def again(goal: str) -> str:
        """Ask the outer loop again."""
        return inner["tool"].handler(goal=goal)

    middle = AgentLoop([Tool.from_function(again)], lambda goal, state: Intent.call("again", goal="x"), finished)
    outer = AgentLoop([middle.as_tool("middle")], lambda goal, state: Intent.call("middle", goal="x")
                      if not state.observations else Finish(str(state.observations[-1].payload)), finished)
    inner["tool"] = outer.as_tool("outer")
    result = outer.run("go", run_id="o")
    assert "agent 'middle' ended in fatal_error: LoopCycle" in result.answer
    assert "(o → o/middle.1)" in result.answer


def test_the_tool_has_a_side_effect_when_the_child_has_one():
    @tool(side_effect=True)
    def publish(text: str) -> str:
        """Publish."""
        return "ok"

    quiet = researcher().as_tool("research")
    loud = AgentLoop([publish], lambda goal, state: Finish("x"), finished).as_tool("publisher")
    assert (quiet.side_effect, loud.side_effect) == (False, True)
    assert researcher().as_tool("research", side_effect=True).side_effect


def test_a_tool_with_input_checks_its_arguments_and_gives_their_json_as_the_goal():
    from dataclasses import dataclass

    @dataclass
    class Topic:
        name: str
        depth: int

    goals: list[str] = []

    def policy(goal, state):
        goals.append(goal)
        return Finish("ok")

    child = AgentLoop([lookup], policy, finished).as_tool("research", input=Topic)
    assert child.schema["required"] == ["name", "depth"]
    writer = AgentLoop([child], lambda goal, state: Intent.call("research", name="otters", depth=2)
                       if not state.observations else Finish(state.observations[-1].status), finished)
    assert writer.run("w").answer == "ok"
    assert goals == ['{"depth": 2, "name": "otters"}']
    refused = AgentLoop([child], lambda goal, state: Intent.call("research", name="otters")
                        if not state.observations else Finish(str(state.observations[-1].payload)), finished)
    assert "depth" in refused.run("w").answer and len(goals) == 1


def test_input_that_is_not_an_objects_shape_is_refused_naming_it():
    with pytest.raises(ValueError, match="as_tool input must be an object's shape"):
        researcher().as_tool("research", input=int)


def test_children_of_names_the_loops_a_loops_tools_run():
    child = researcher()
    writer = AgentLoop([child.as_tool("research"), lookup], asking("otters"), finished)
    assert children_of(writer) == {"research": child}


def test_an_async_child_runs_under_an_async_parent_with_its_path():
    async def alookup(topic: str) -> str:
        """Look a topic up, awaited."""
        await asyncio.sleep(0)
        return f"async facts about {topic}"

    from forge import Tool

    child = AgentLoop([Tool.from_function(alookup)], lambda goal, state: Intent.call("alookup", topic=goal)
                      if not state.observations else Finish(state.observations[-1].payload), finished)
    writer = AgentLoop([child.as_tool("research")], asking("otters"), finished)
    result = asyncio.run(writer.arun("write", run_id="a"))
    assert result.answer == ["async facts about otters"]
    assert result.children[0].path == "a/research.1"


def test_children_called_together_each_get_a_path_of_their_own():
    def policy(goal, state):
        if not state.observations:
            return [Intent.call("research", goal="otters"), Intent.call("research", goal="seals")]
        return Finish(sorted(str(o.payload) for o in state.observations))

    writer = AgentLoop([researcher().as_tool("research")], policy, finished, limits=Limits(max_parallel=2))
    result = writer.run("write", run_id="p")
    assert sorted(child.path for child in result.children) == ["p/research.1", "p/research.2"]
    assert result.answer == ["notes: facts about otters", "notes: facts about seals"]


# --- seen as one machine -------------------------------------------------------------------

EXAMPLE = __import__("pathlib").Path(__file__).parents[1] / "examples" / "writer.py"


def writer_example():
    from forge.machine.catalog import import_reference

    return import_reference(f"{EXAMPLE}:writer", "test", "")


def test_a_loop_with_a_child_is_drawn_with_the_child_as_a_cluster_joined_where_tools_are_called():
    from forge.diagram import diagram

    source = diagram(writer_example()).source
    assert 'subgraph "cluster_research/" {' in source
    assert 'label="research: forge: tool loop with approvals"' in source
    assert '"research/approve"' in source  # the child's states, named under it
    assert 'execute -> "research/__start__" [label="research (child run)"' in source


def test_a_composed_diagram_overlays_each_childs_run():
    from forge.diagram import diagram

    writer = writer_example()
    result = writer.run("article")
    source = diagram(writer, result).source
    assert "run: 11 transitions, ended in verified_success" in source
    child = result.children[-1].result
    assert f"run: {len(child.trace)} transitions, ended in verified_success" in source


def test_a_composed_mermaid_diagram_nests_the_child_as_a_composite_state():
    from forge.diagram import mermaid

    text = mermaid(writer_example())
    assert 'state "research: forge: tool loop with approvals" as research {' in text
    assert "        research__approve --> research__execute: " in text
    assert "    execute --> research: research (child run)" in text


def test_a_loop_without_children_draws_exactly_as_its_definition():
    from forge.diagram import diagram, mermaid

    loop = researcher()
    assert diagram(loop).source == diagram(loop.definition).source
    assert mermaid(loop) == mermaid(loop.definition)


def test_forge_diagram_draws_a_loop_named_module_colon_loop(tmp_path):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "forge", "diagram", f"{EXAMPLE}:writer", "--format", "dot"],
                          capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert 'subgraph "cluster_research/"' in done.stdout
    wrong = subprocess.run([sys.executable, "-m", "forge", "diagram", f"{EXAMPLE}:LIBRARY"], capture_output=True,
                           text=True, cwd=tmp_path)
    assert wrong.returncode == 1 and "that is a dict, not an AgentLoop" in wrong.stderr


def test_a_childs_side_effect_without_approval_is_a_finding_of_the_parent(tmp_path):
    from forge.records.definition import DefinitionError

    single = (__import__("pathlib").Path(__file__).parents[1] / "machines" / "single_agent.toml").read_text()
    strict = tmp_path / "strict.toml"
    strict.write_text(single + '\n[checks]\nrequire = ["approval-before-side-effect"]\n')
    writer = writer_example()
    with pytest.raises(DefinitionError, match="approval-before-side-effect"):
        AgentLoop([writer.tools[0]], asking("otters"), finished, definition=strict)
    AgentLoop([researcher().as_tool("research")], asking("otters"), finished, definition=strict)  # no side effect


def test_the_writer_example_runs_durably_its_children_inside_the_parents_calls(make):
    from forge.user_code import import_file

    example = import_file(EXAMPLE)
    kept = len(example.NOTES)
    durable = make(example.writer)
    result = durable.run("a short article on how marine mammals sleep", run_id="durable-article")
    assert result.status == "finished"
    assert result.answer.startswith("Sea otters hold hands while they sleep")
    assert len(example.NOTES) == kept + 2  # each child kept its note once, approved inside the child


def test_the_writer_example_forks_at_a_child_transition_calling_nothing_before_it(tmp_path, monkeypatch):
    from forge import Patch
    from forge.records.trace import write_trace
    from forge.user_code import import_file

    example = import_file(EXAMPLE)
    recorded = example.writer.run("a short article on how marine mammals sleep", run_id="article")
    path = write_trace(recorded.trace, tmp_path / "article.jsonl", journal=recorded.journal)
    looked_up: list[str] = []

    class Library(dict):
        def get(self, topic, default=None):
            looked_up.append(topic)
            return super().get(topic, default)

    monkeypatch.setattr(example, "LIBRARY", Library(example.LIBRARY))
    kept = len(example.NOTES)
    seals = recorded.children[1].result
    approved = next(r.sequence for r in seals.trace if r.source == "approve" and r.detail["tool"] == "keep_note")
    fork = example.writer.fork(path, approved, Patch.approved(False), child="research.2")
    assert looked_up == [] and len(example.NOTES) == kept  # nothing called in the writer or the researcher
    child = fork.children[1].result
    assert child.trace[approved - 1].detail["patched"] == {"approved": False}
    assert fork.children[0].path == "article/research.1"  # the otters' run, replayed as recorded


# --- a child's question reaches the parent's person ------------------------------------


def deferring_researcher(notes: list[str]) -> AgentLoop:
    """A researcher whose note is a side effect its approver leaves to a person (None)."""
    @tool(side_effect=True)
    def keep_note(text: str) -> str:
        """Keep a note."""
        notes.append(text)
        return f"note {len(notes)} kept"

    def policy(goal, state):
        if not state.observations:
            return Intent.call("keep_note", text=f"about {goal}")
        return Finish(f"noted {goal}: {state.observations[-1].payload} ({state.observations[-1].status})")

    return AgentLoop([keep_note], policy, finished, definition="approval", approver=lambda request: None)


def test_a_durable_childs_approval_is_asked_of_the_parents_person_bound_to_the_childs_call(make):
    from forge.durable import Answer

    notes: list[str] = []
    durable = make(AgentLoop([deferring_researcher(notes).as_tool("research")], asking("otters"), finished))
    waiting = durable.run("write", run_id="w")
    assert (waiting.status, waiting.reason) == ("waiting", "approval_required")
    assert waiting.waiting.run == "w/research.1" and waiting.waiting.tool == "keep_note"
    assert waiting.waiting.arguments == {"text": "about otters"} and notes == []
    done = durable.resume("w", Answer.approve(waiting.waiting.fingerprint))
    assert done.reason == "verified_success" and notes == ["about otters"]
    assert done.answer == ["noted otters: note 1 kept (ok)"]


def test_a_durable_childs_approval_refuses_an_answer_for_another_call(make):
    from forge.durable import Answer, AnswerRefused

    notes: list[str] = []
    durable = make(AgentLoop([deferring_researcher(notes).as_tool("research")], asking("otters"), finished))
    durable.run("write", run_id="w2")
    with pytest.raises(AnswerRefused, match="bound to the exact call"):
        durable.resume("w2", Answer.approve("0" * 64))
    assert notes == []


def test_a_durable_childs_rejected_call_is_told_to_the_childs_policy(make):
    from forge.durable import Answer

    notes: list[str] = []
    durable = make(AgentLoop([deferring_researcher(notes).as_tool("research")], asking("otters"), finished))
    waiting = durable.run("write", run_id="w3")
    done = durable.resume("w3", Answer.reject(waiting.waiting.fingerprint))
    assert notes == [] and done.reason == "verified_success"
    assert "retryable_error" in done.answer[0]


def test_in_memory_a_child_left_waiting_is_a_tool_error_naming_where_it_waits():
    notes: list[str] = []
    writer = AgentLoop([deferring_researcher(notes).as_tool("research")], asking("otters"), finished)
    result = writer.run("write")
    assert "agent 'research' ended in approval_required" in result.answer[0] and notes == []


def test_a_childs_question_says_which_child_asks(make):
    notes: list[str] = []
    durable = make(AgentLoop([deferring_researcher(notes).as_tool("research")], asking("otters"), finished))
    waiting = durable.run("write", run_id="w4")
    assert waiting.waiting.question.startswith("child run w4/research.1 asks: approve keep_note")
    assert waiting.summary.startswith("child run w4/research.1 asks: may it call keep_note(")


def test_a_durable_childs_own_question_is_answered_by_the_parents_person_and_the_child_goes_on(make):
    from forge import Ask
    from forge.durable import Answer

    def wondering(goal, state):
        if goal == "which animal?":
            return Ask("which animal?")
        return Finish(f"about {goal}")

    child = AgentLoop([lookup], wondering, finished)
    durable = make(AgentLoop([child.as_tool("research")], asking("which animal?"), finished))
    waiting = durable.run("write", run_id="ask")
    assert (waiting.reason, waiting.waiting.run, waiting.waiting.prompt) == ("input_required", "ask/research.1",
                                                                          "which animal?")
    done = durable.resume("ask", Answer.text("seals"))
    assert done.reason == "verified_success" and done.answer == ["about seals"]


# --- token budget flows down ------------------------------------------------------------


def spending(tokens: int, then):
    """A policy that spends `tokens` per decision (a message with usage), then decides as `then`."""
    def policy(goal, state):
        state.messages.append({"role": "assistant", "content": "x", "_usage": {"prompt_tokens": tokens,
                                                                               "completion_tokens": 0}})
        return then(goal, state)
    return policy


def test_a_childs_token_budget_is_what_its_parent_has_left():
    from forge import Limits

    child = AgentLoop([lookup], spending(40, lambda goal, state: Intent.call("lookup", topic=f"t{len(CALLS)}")),
                      finished, max_steps=8, limits=Limits(repeat_limit=10))
    writer = AgentLoop([child.as_tool("research")], spending(30, asking("otters")), finished,
                       limits=Limits(token_budget=150))
    result = writer.run("write")
    researched = result.children[0].result
    assert researched.reason == "budget_exhausted"
    assert researched.trace[-1].detail["token_budget"] == 120  # 150 less the parent's first 30
    assert researched.usage.total_tokens == 120


def test_a_fork_inside_a_child_run_keeps_the_budget_its_parent_had_left():
    from forge import Limits

    child = AgentLoop([lookup], spending(40, lambda goal, state: Intent.call("lookup", topic=f"t{len(state.observations)}")),
                      finished, max_steps=8, limits=Limits(repeat_limit=10))
    writer = AgentLoop([child.as_tool("research")], spending(30, asking("otters")), finished,
                       limits=Limits(token_budget=150))
    recorded = writer.run("write", run_id="w")
    forked = writer.fork(recorded, 3, None, child="research.1")
    assert forked.reason == "verified_success"  # the child's tool did not fail (a TypeError before)
    researched = forked.children[0].result
    assert researched.reason == "budget_exhausted"
    assert researched.trace[-1].detail["token_budget"] == 120  # as in the recorded child: 150 less 30


def test_a_second_child_starts_with_what_the_parent_and_the_first_child_left_of_the_budget():
    """Budget 300; the parent spends 30 a decision, the child 40. The first child (otters)
    decides twice, 80; the second (seals) never finishes. Called after the parent's two
    decisions and the first child's 80, the second child has 300 - 30 - 80 - 30 = 160, not
    the 240 it would have if the first child's tokens were not counted."""
    from forge import Limits

    def researching(goal, state):
        if goal == "otters" and state.observations:
            return Finish("noted")
        return Intent.call("lookup", topic=f"{goal} {len(state.observations)}")

    child = AgentLoop([lookup], spending(40, researching), finished, max_steps=20, limits=Limits(repeat_limit=50))
    writer = AgentLoop([child.as_tool("research")], spending(30, asking("otters", "seals")), finished,
                       limits=Limits(token_budget=300))
    first, second = (each.result for each in writer.run("write").children)
    assert (first.reason, first.usage.total_tokens) == ("verified_success", 80)
    assert second.reason == "budget_exhausted" and second.trace[-1].detail["token_budget"] == 160


def test_a_run_may_be_given_a_lower_token_budget_than_its_loops():
    from forge import Limits

    loop = AgentLoop([lookup], spending(40, lambda goal, state: Intent.call("lookup", topic=f"t{len(CALLS)}")),
                     finished, max_steps=40, limits=Limits(token_budget=1000, repeat_limit=50))
    assert loop.run(RunStart("x", token_budget=80)).usage.total_tokens == 80
    larger = loop.run(RunStart("x", token_budget=5000))  # a larger one is the loop's
    assert (larger.reason, larger.usage.total_tokens) == ("budget_exhausted", 1000)


# --- the debugger steps into a child run and finishes back out ---------------------------


def stepping_writer():
    return AgentLoop([researcher().as_tool("research")], asking("otters"), finished)


def test_step_into_opens_the_child_run_the_next_call_makes_before_any_of_it_runs():
    session = stepping_writer().debug("write", run_id="d")
    session.step()  # select -choose-> execute: the research call is next
    child = session.step_into()
    assert (child.run.trace.run_id, child.goal, child.state) == ("d/research.1", "otters", "select")
    assert CALLS == [] and child.parent is session


def test_a_child_session_steps_and_goes_back_like_any_session():
    session = stepping_writer().debug("write", run_id="d")
    session.step()
    child = session.step_into()
    child.step()
    child.step()
    assert CALLS == ["otters"]
    child.back()
    child.step()
    assert CALLS == ["otters"]  # stepped over again from the record


def test_finish_runs_the_child_to_its_end_and_the_parents_call_takes_its_answer_calling_nothing_twice():
    session = stepping_writer().debug("write", run_id="d")
    session.step()
    child = session.step_into()
    child.step()
    record = child.finish()
    assert (record.source, record.trigger, record.detail["tool"]) == ("execute", "call", "research")
    assert CALLS == ["otters"]
    session.continue_()
    result = session.result
    assert result.answer == ["notes: facts about otters"]
    assert [c.path for c in result.children] == ["d/research.1"]
    assert list(result.children[0].result.trace) == list(child.trace)


def test_step_into_where_no_agent_tool_is_called_next_says_why():
    from forge.errors import UsageError

    session = stepping_writer().debug("write")
    with pytest.raises(UsageError, match=r"from 'select'\) calls no tool: step into needs"):
        session.step_into()


def test_finish_outside_a_child_run_says_so():
    from forge.errors import UsageError

    with pytest.raises(UsageError, match="not a child run"):
        stepping_writer().debug("write").finish()


def test_the_debugger_shell_steps_into_a_child_and_finishes_back_out():
    from forge.debug.repl import DebugShell

    lines: list[str] = []
    shell = DebugShell(stepping_writer().debug("write", run_id="d"), colour=False)
    shell.say = lines.append
    for line in ("step", "step into", "step", "finish"):
        shell.onecmd(line)
    assert "in child run d/research.1 (single_agent); goal: otters" in lines
    assert "child run d/research.1 ended in verified_success" in lines
    assert shell.session.state == "observe" and shell.session.parent is None


def test_a_durable_childs_side_effects_run_under_keys_made_from_the_parents_call(make):
    from forge.durable import idempotency_key

    keys: list[str | None] = []

    @tool(side_effect=True)
    def file_note(text: str) -> str:
        """File a note."""
        keys.append(idempotency_key())
        return "filed"

    def noting(goal, state):
        if not state.observations:
            return Intent.call("file_note", text=goal)
        return Finish(f"filed {goal}")

    child = AgentLoop([file_note], noting, finished)
    durable = make(AgentLoop([child.as_tool("research")], asking("otters", "seals"), finished))
    assert durable.run("write", run_id="keyed").status == "finished"
    assert keys == ["keyed/1/research/1/file_note", "keyed/2/research/1/file_note"]
    docs = (Path(__file__).resolve().parents[1] / "docs" / "composition.md").read_text(encoding="utf-8")
    assert f"`{keys[0]}`" in " ".join(docs.split())  # the docs give the key a child's handler receives


def test_a_durable_childs_calls_are_stored_under_its_path_as_its_own_run_makes_them(make):
    """A child of a durable run keeps a journal as its parent does, under its path: a child
    cut short by a crash, or taken on by another worker after an answer, replays them."""
    from forge.durable.performer import StoredCalls

    durable = make(AgentLoop([researcher().as_tool("research")], asking("otters"), finished))
    assert durable.run("write", run_id="kept").status == "finished"
    alone = researcher().run("otters")
    stored = StoredCalls(durable.database, "kept/research.1").calls
    assert [(call.kind, call.name, call.value) for call in stored] == \
        [(call.kind, call.name, call.value) for call in alone.journal]


def test_child_runs_nest_no_deeper_than_max_depth_even_when_the_cycle_check_misses(monkeypatch):
    """The depth bound stands apart from the cycle check: with a cycle check that never
    sees the loop in its own lineage, a loop calling itself fails at MAX_DEPTH naming the
    path, instead of recursing until the machine runs out of memory."""
    import forge.machine.child
    from forge import Tool

    monkeypatch.setattr(forge.machine.child, "MAX_DEPTH", 5)
    monkeypatch.setattr(AgentLoop, "runs", lambda self, run: False)
    inner: dict[str, Tool] = {}

    def again(goal: str) -> str:
        """Ask this very loop again, through its own as_tool."""
        return inner["tool"].handler(goal=goal)

    looping = AgentLoop([Tool.from_function(again)], lambda goal, state: Intent.call("again", goal="x")
                        if not state.observations else Finish(str(state.observations[-1].payload)), finished)
    inner["tool"] = looping.as_tool("inner")
    result = looping.run("go", run_id="d")
    assert "LoopCycle" in result.answer and "5 levels deep (d → d/inner.1 → d/inner.1/inner.1 →" in result.answer
    assert "forge.machine.child.MAX_DEPTH" in result.answer


# From the mutation run (issue 55): promises of forge/machine/child.py no test held yet


def test_under_arun_a_child_that_fails_is_a_tool_error_naming_the_agent():
    async def endless(goal, state):
        return Intent.call("lookup", topic=f"more {len(state.observations)}")

    child = AgentLoop([lookup], endless, finished, max_steps=2, limits=Limits(repeat_limit=100))
    writer = AgentLoop([child.as_tool("research")], asking("otters"), finished)
    seen = asyncio.run(writer.arun("write")).state.observations[0]
    assert str(seen.payload) == "agent 'research' ended in step_budget_exhausted"  # no reason beyond it: no ': '


def test_a_child_called_at_its_parents_last_step_has_exactly_one_step():
    def endless(goal, state):
        return Intent.call("lookup", topic=f"more {len(state.observations)}")

    def parent(goal, state):
        done = len(state.observations)
        return Intent.call("lookup", topic=f"own {done}") if done < 2 else Intent.call("research", goal="otters")

    child = AgentLoop([lookup], endless, finished, max_steps=50, limits=Limits(repeat_limit=100))
    result = AgentLoop([lookup, child.as_tool("research")], parent, finished, max_steps=3).run("write")
    assert result.children[0].result.steps == 1


def test_a_child_in_a_later_turn_counts_only_that_turns_steps_against_its_budget():
    """A conversation's second turn has a step budget of its own (max_steps again); a child
    called at its first step may take all of it, whatever the first turn used."""
    def endless(goal, state):
        return Intent.call("lookup", topic=f"more {len(state.observations)}")

    def parent(goal, state):
        if goal == "first":
            return Intent.call("lookup", topic="own") if len(state.observations) < 2 else Finish("ok")
        return Intent.call("research", goal="otters")

    child = AgentLoop([lookup], endless, finished, max_steps=50, limits=Limits(repeat_limit=100))
    writer = AgentLoop([lookup, child.as_tool("research")], parent, finished, max_steps=4)
    first = writer.run("first")
    second = writer.run("second", state=first.state)
    assert second.children[0].result.steps == 4


def test_a_child_given_the_last_token_of_its_parents_budget_has_a_budget_of_one():
    child = AgentLoop([lookup], spending(40, lambda goal, state: Intent.call("lookup", topic="t")),
                      finished, max_steps=8, limits=Limits(repeat_limit=10))
    writer = AgentLoop([child.as_tool("research")], spending(29, asking("otters")), finished,
                       limits=Limits(token_budget=30))
    researched = writer.run("write").children[0].result
    assert researched.trace[-1].detail["token_budget"] == 1


def test_a_replay_keeps_each_recorded_child_once_in_order():
    writer = AgentLoop([researcher().as_tool("research")], asking("otters", "seals", "owls"), finished)
    result = writer.run("write", run_id="w")
    again = writer.replay(result.journal)
    assert [child.path for child in again.children] == ["w/research.1", "w/research.2", "w/research.3"]
    assert [child.result.answer for child in again.children] == [child.result.answer for child in result.children]


def test_an_agent_tool_has_a_side_effect_when_a_loop_its_loop_hands_off_to_hands_off_to_one_that_has():
    from forge import Tool, load_definition

    sender = AgentLoop([Tool("send", {"send"}, lambda: "sent", side_effect=True)], research_policy, finished)
    relay = AgentLoop([lookup], research_policy, finished,
                      definition=load_definition("single_agent").with_handoffs("sender")).with_handoffs(sender=sender)
    front = AgentLoop([lookup], research_policy, finished,
                      definition=load_definition("single_agent").with_handoffs("relay")).with_handoffs(relay=relay)
    assert front.as_tool("front").side_effect


def test_loop_at_follows_a_path_of_agent_tools_down_even_where_a_tool_name_has_a_dot():
    from forge.machine.child import loop_at

    notes = researcher()
    middle = AgentLoop([notes.as_tool("v2.notes")], asking("x"), finished)
    top = AgentLoop([middle.as_tool("research")], asking("x"), finished)
    assert loop_at(top, "research.2/v2.notes.1") is notes


def test_loop_at_a_path_with_no_agent_tool_names_the_agent_tools_there():
    from forge.errors import UsageError
    from forge.machine.child import loop_at

    top = AgentLoop([researcher().as_tool("research"), researcher().as_tool("archive")], asking("x"), finished)
    with pytest.raises(UsageError, match=r"it has no agent tool 'notes' \(its agent tools: archive, research\)"):
        loop_at(top, "notes.1")
    with pytest.raises(UsageError, match=r"it has no agent tool 'lookup' \(its agent tools: none\)"):
        loop_at(top, "research.1/lookup.1")


def test_a_loop_cycle_says_that_a_loop_cannot_call_itself():
    from forge import Tool

    inner: dict[str, Tool] = {}
    looping = AgentLoop([Tool.from_function(lambda goal: inner["tool"].handler(goal=goal), name="again")],
                        lambda goal, state: Intent.call("again", goal="x"), finished)
    inner["tool"] = looping.as_tool("inner")
    assert str(looping.run("go").error).endswith("a loop cannot call itself, directly or through another")


def test_a_typed_input_that_is_not_json_becomes_the_goal_as_its_text():
    import datetime

    heard = []
    child = AgentLoop([lookup], lambda goal, state: heard.append(goal) or Finish("ok"), finished)
    tool_ = child.as_tool("research", input={"type": "object", "properties": {"when": {}}})
    writer = AgentLoop([tool_], lambda goal, state: Intent.call("research", when=datetime.date(2026, 1, 2))
                       if not state.observations else Finish("done"), finished)
    assert writer.run("write").reason == "verified_success"
    assert heard == ['{"when": "2026-01-02"}']


def test_input_that_is_not_an_objects_shape_names_the_type_it_has():
    with pytest.raises(ValueError, match="got one of type 'integer'"):
        researcher().as_tool("research", input={"type": "integer"})


def test_a_fork_at_the_transition_that_made_a_child_makes_it_again_in_its_place():
    """Forked where the second child was made, the fork keeps the first child as recorded
    and makes the second live: two children, numbered as before, not the recorded second
    beside a live third."""
    writer = AgentLoop([researcher().as_tool("research")], asking("otters", "seals"), finished)
    result = writer.run("write", run_id="w")
    forked = writer.fork(result, result.children[1].transition, run_id="f")
    assert [child.path for child in forked.children] == ["w/research.1", "f/research.2"]


def test_a_fork_inside_a_child_whose_replay_misses_raises_the_childs_journal_miss():
    from forge.records.journal import JournalMiss

    writer = AgentLoop([researcher().as_tool("research")], asking("otters"), finished)
    recorded = writer.run("write", run_id="w")

    def other_research(goal, state):  # asks another topic than the recorded child did
        return Intent.call("lookup", topic=f"{goal}!") if not state.observations else Finish("notes")

    changed = AgentLoop([AgentLoop([lookup], other_research, finished).as_tool("research")], asking("otters"),
                        finished)
    with pytest.raises(JournalMiss):
        changed.fork(recorded, 4, child="research.1")
    assert CALLS == ["otters"]  # the recorded run's own lookup only: the fork called nothing


def test_a_childs_typed_answer_reaches_its_parent_as_json_data():
    import dataclasses
    import datetime

    pydantic = pytest.importorskip("pydantic")

    class Visit(pydantic.BaseModel):
        place: str
        on: datetime.date

    @dataclasses.dataclass
    class Count:
        items: int

    for output, answer, expected in ((Visit, Visit(place="zoo", on=datetime.date(2026, 1, 2)),
                                      {"place": "zoo", "on": "2026-01-02"}),
                                     (Count, Count(3), {"items": 3})):
        child = AgentLoop([lookup], lambda goal, state, answer=answer: Finish(answer), finished, output=output)
        writer = AgentLoop([child.as_tool("research")], asking("plans"), finished)
        result = writer.run("write")
        assert result.state.observations[0].payload == expected
        assert result.answer == [str(expected)]


def test_a_streamed_parent_tells_of_each_child_run_beginning_and_ending():
    from forge.events import ChildRunFinished, ChildRunStarted, RunStarted

    writer = AgentLoop([researcher().as_tool("research")], asking("otters"), finished)
    events = list(writer.stream("write", run_id="s"))
    started = [e for e in events if isinstance(e, ChildRunStarted)]
    ended = [e for e in events if isinstance(e, ChildRunFinished)]
    assert events[0] == RunStarted("s", "write")
    assert (started, ended) == ([ChildRunStarted("s/research.1", "research")],
                                [ChildRunFinished("s/research.1", "verified_success", "success")])
    assert events.index(started[0]) < events.index(ended[0])
