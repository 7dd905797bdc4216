"""What a waiting run says to people and to programs (issue 54 item 5): a question in words
with no Python in it, the answers that fit as `{kind, value}` data, and the command lines
that give each, which the command line reads back as those very answers."""

import shlex

import pytest

from forge.durable.answers import read_answer
from forge.records.answers import Waiting

FP = "5c1692882d92"
WAITS = {
    "approval": Waiting("approval_required", tool="send", arguments={"to": "bob"}, fingerprint=FP),
    "clarification": Waiting("clarification_required", tied=("fast search", "deep_search")),
    "gap": Waiting("capability_gap", capabilities=("translate",)),
    "in_doubt": Waiting("in_doubt", tool="send", arguments={"to": "bob"}, key="k1"),
    "ask": Waiting("input_required", prompt="Which city?"),
}


@pytest.mark.parametrize("name", WAITS)
def test_what_people_and_programs_are_shown_has_no_python(name):
    shown = WAITS[name].shown()
    assert "Answer." not in shown["question"] and "FINGERPRINT" not in shown["question"]
    assert all("Answer." not in command for command in WAITS[name].commands("r1"))


@pytest.mark.parametrize(("name", "answers"), [
    ("approval", [{"kind": "approve", "value": FP}, {"kind": "reject", "value": FP}]),
    ("clarification", [{"kind": "tool", "value": "fast search"}, {"kind": "tool", "value": "deep_search"}]),
    ("gap", [{"kind": "tool", "value": None}, {"kind": "add_tool", "value": None}]),
    ("in_doubt", [{"kind": "did_run", "value": None}, {"kind": "run_again", "value": None}]),
    ("ask", [{"kind": "text", "value": None}]),
])
def test_programs_are_given_the_answers_that_fit_with_the_values_the_question_fixes(name, answers):
    assert WAITS[name].shown()["answers"] == answers


def test_each_command_answers_with_a_choice_it_is_made_from():
    commands = WAITS["clarification"].commands("run 1", "runs.sqlite")
    assert commands == ("forge runs resume 'run 1' --db runs.sqlite --tool 'fast search'",
                        "forge runs resume 'run 1' --db runs.sqlite --tool deep_search")
    assert shlex.split(commands[0])[-1] == "fast search"


@pytest.mark.parametrize(("name", "flags"), [
    ("approval", [f"--approve {FP}", f"--reject {FP}"]),
    ("gap", ["--tool NAME", "--add-tool NAME"]),
    ("in_doubt", ["--did-run JSON", "--run-again"]),
    ("ask", ["--text REPLY"]),
])
def test_a_command_shows_what_a_person_fills_in_by_its_placeholder(name, flags):
    assert [command.removeprefix("forge runs resume r1 ") for command in WAITS[name].commands("r1")] == flags


def test_an_approval_command_reads_back_as_the_approval_it_says():
    flag, fingerprint = WAITS["approval"].commands("r1")[0].split()[-2:]
    answer = read_answer(flag.removeprefix("--"), fingerprint)
    assert (answer.kind, answer.value) == ("approve", FP)
