"""Handoff (issue 34, item 2): a policy hands the conversation to another loop
(`forge.Handoff`); the definition says which it may hand off to, so the handoffs are drawn and
checked; the other loop goes on from the conversation as a child run, and its answer is the
run's answer."""

from __future__ import annotations

import pytest

from forge import AgentLoop, Finish, Handoff, Intent, tool
from forge.errors import UsageError
from forge.machine.loader import load_definition
from forge.policy import FINISH

CALLS: list[str] = []


def finished(observation) -> bool:
    return observation.tool_name == FINISH


@tool
def look_up_order(order: str) -> str:
    """Look an order up."""
    CALLS.append(f"look_up_order {order}")
    return f"order {order}: paid twice"


@tool(side_effect=True)
def refund(order: str) -> str:
    """Refund an order."""
    CALLS.append(f"refund {order}")
    return f"order {order} refunded"


def triaging(goal, state):
    if not state.observations:
        return Intent.call("look_up_order", order="A7")
    return Handoff("billing", note=f"refund the double payment: {state.observations[-1].payload}")


def billing_policy(goal, state):
    mine = [o for o in state.observations if o.tool_name == "refund"]
    if not mine:
        return Intent.call("refund", order="A7")
    return Finish(f"{mine[-1].payload} (asked: {goal})")


billing = AgentLoop([refund], billing_policy, finished)
HANDING = load_definition("single_agent").with_handoffs("billing")


def triage(**options) -> AgentLoop:
    return AgentLoop([look_up_order], triaging, finished, definition=HANDING, **options).with_handoffs(billing=billing)


@pytest.fixture(autouse=True)
def no_calls():
    CALLS.clear()


def test_the_loop_handed_to_answers_the_run():
    result = triage().run("customer A7 was charged twice", run_id="t")
    assert result.reason == "verified_success"
    assert result.answer == "order A7 refunded (asked: refund the double payment: order A7: paid twice)"
    assert CALLS == ["look_up_order A7", "refund A7"]


def test_the_handoff_is_a_child_run_that_goes_on_from_the_conversation():
    result = triage().run("customer A7 was charged twice", run_id="t")
    handed = result.children[0]
    assert (handed.path, handed.tool) == ("t/billing.1", "billing")
    assert handed.result.state.observations[0].tool_name == "look_up_order"  # it saw what triage saw


def test_the_handing_transition_says_where_the_conversation_went():
    result = triage().run("customer A7 was charged twice")
    select = next(r for r in result.trace if r.detail.get("handoff"))
    assert (select.source, select.trigger, select.detail["handoff"]) == ("select", "finish", "billing")


def test_a_replay_takes_the_handoffs_answer_from_the_journal_and_runs_neither_loop():
    recorded = triage().run("customer A7 was charged twice")
    CALLS.clear()
    again = triage().replay(recorded.journal)
    assert again.answer == recorded.answer and CALLS == []
    assert [entry.kind for entry in recorded.journal if entry.kind == "handoff"] == ["handoff"]


def test_a_handoff_that_fails_ends_the_run_naming_why():
    stuck = AgentLoop([refund], lambda goal, state: Intent.call("refund", order=f"x{len(state.observations)}"),
                      finished, max_steps=2)
    loop = AgentLoop([look_up_order], triaging, finished, definition=HANDING).with_handoffs(billing=stuck)
    result = loop.run("charged twice")
    assert result.reason == "fatal_error"
    assert "agent 'billing' ended in step_budget_exhausted" in str(result.error)


def test_a_handoff_to_a_loop_the_run_cannot_hand_off_to_ends_it_naming_its_handoffs():
    loop = AgentLoop([look_up_order], lambda goal, state: Handoff("shipping"), finished,
                     definition=HANDING).with_handoffs(billing=billing)
    result = loop.run("where is my parcel")
    assert result.reason == "fatal_error"
    assert "handed the conversation to 'shipping'" in str(result.error) and "its handoffs are: billing" in str(result.error)


def test_a_loop_refuses_handoffs_its_definition_does_not_list():
    with pytest.raises(UsageError, match="allows no handoff to 'billing' .it lists none."):
        AgentLoop([look_up_order], triaging, finished).with_handoffs(billing=billing)


def test_a_loop_whose_definition_allows_a_handoff_it_has_no_loop_for_refuses_to_run():
    loop = AgentLoop([look_up_order], triaging, finished, definition=HANDING)
    with pytest.raises(UsageError, match="allows handoffs to 'billing', which this loop has no loop for"):
        loop.run("charged twice")
    assert CALLS == []


def test_a_handoff_must_be_a_loop():
    with pytest.raises(UsageError, match=r"handoffs\['billing'\] must be an AgentLoop, got function"):
        AgentLoop([look_up_order], triaging, finished, definition=HANDING).with_handoffs(billing=billing_policy)


def test_a_definition_file_lists_its_handoffs(tmp_path):
    single = (__import__("pathlib").Path(__file__).parents[1] / "machines" / "single_agent.toml").read_text()
    path = tmp_path / "triage.toml"
    path.write_text(single + '\n[handoffs]\nto = ["billing"]\n')
    assert load_definition(path).handoffs == ("billing",)
    bad = tmp_path / "bad.toml"
    bad.write_text(single + '\n[handoffs]\nto = ["billing", "billing"]\n')
    with pytest.raises(ValueError, match="handoffs.to: names 'billing' more than once"):
        load_definition(bad)


def test_the_handoffs_are_drawn_as_clusters_joined_from_where_the_policy_decides():
    from forge.diagram import diagram, mermaid

    source = diagram(triage()).source
    assert 'subgraph "cluster_billing/" {' in source
    assert 'select -> "billing/__start__" [label="handoff to billing"' in source
    assert "    select --> billing: handoff to billing" in mermaid(triage())


def test_a_side_effect_of_a_loop_handed_to_is_checked_as_the_runs_own(tmp_path):
    from forge.records.definition import DefinitionError

    single = (__import__("pathlib").Path(__file__).parents[1] / "machines" / "single_agent.toml").read_text()
    strict = tmp_path / "strict.toml"
    strict.write_text(single + '\n[checks]\nrequire = ["approval-before-side-effect"]\n[handoffs]\nto = ["billing"]\n')
    with pytest.raises(DefinitionError, match="approval-before-side-effect"):
        AgentLoop([look_up_order], triaging, finished, definition=strict).with_handoffs(billing=billing)


def test_a_durable_run_hands_off_and_keeps_the_answer(make):
    durable = make(triage())
    result = durable.run("customer A7 was charged twice", run_id="durable-triage")
    assert result.status == "finished" and result.answer.startswith("order A7 refunded")
    assert CALLS == ["look_up_order A7", "refund A7"]
    assert [child.path for child in result.children] == ["durable-triage/billing.1"]


def test_a_fork_inside_a_loop_handed_to_is_refused_saying_where_to_fork_instead():
    from forge.machine.fork import PatchRefused

    recorded = triage().run("customer A7 was charged twice", run_id="t")
    with pytest.raises(PatchRefused, match="is a handoff to 'billing'.*handing transition 5"):
        triage().fork(recorded, 2, None, child="billing.1")
