"""What `forge eval --against BASELINE` prints of two evals side by side, as a reader sees
it (`forge.evals.compare`'s texts): the header's scores and counts, one line per case that
changed, where its runs diverge (at most two differences, each cut to 60 characters, then
how many more), and each regression under its case. (Written from the mutation run: the
report's texts were asserted nowhere.)"""

from forge.evals.compare import CaseChange, Comparison, Divergence
from forge.evals.results import CaseResult
from forge.machine.diff import Difference


def case(name, score, reason="verified_success", outcome="success"):
    return CaseResult(name, "goal", score, reason=reason, outcome=outcome)


def test_a_divergence_shows_two_differences_and_how_many_more():
    differences = tuple(Difference(5, what, a, b) for what, a, b in
                        (("state", "verify", "select"), ("call", "read", "write"), ("arguments", "x", "y")))
    assert str(Divergence(2, 5, differences)) == ("turn 2, transition 5: state verify → select; call read → write; "
                                                  "and 1 more")
    assert str(Divergence(1, 3, differences[:2])) == "turn 1, transition 3: state verify → select; call read → write"


def test_a_long_difference_is_cut_to_sixty_characters_and_one_of_exactly_sixty_is_not():
    sixty, long = "s" * 60, "l" * 61
    assert str(Divergence(1, 1, (Difference(1, "answer", sixty, long),))) == \
        f"turn 1, transition 1: answer {sixty} → {'l' * 59}…"


def test_two_long_texts_that_differ_late_are_shown_around_where_they_differ():
    """Not their common start twice (`…"conten… → …"conten…`, issue 54 item 6)."""
    common = '{"role": "assistant", "content": "' + "x" * 100
    before, after = common + 'the index lists 3 notes"}', common + 'the index lists 2 notes"}'
    shown = str(Divergence(1, 16, (Difference(16, "detail.messages", before, after),)))
    a, b = shown.split("detail.messages ", 1)[1].split(" → ")
    assert (a, b) == ('…xxxxthe index lists 3 notes"}', '…xxxxthe index lists 2 notes"}')  # 20 shared before


def test_a_difference_in_the_middle_of_two_long_texts_is_cut_to_sixty_at_both_ends():
    shown = str(Divergence(1, 2, (Difference(2, "payload", "x" * 100 + "A" + "y" * 100, "x" * 100 + "B" + "y" * 100),)))
    a, b = shown.split("payload ", 1)[1].split(" → ")
    assert a == "…" + "x" * 20 + "A" + "y" * 37 + "…" and b == "…" + "x" * 20 + "B" + "y" * 37 + "…"


def test_a_long_text_against_a_short_one_shows_the_short_one_whole_from_where_they_part():
    shown = str(Divergence(1, 2, (Difference(2, "answer", "ok", "o" + "k" * 80),)))
    assert shown == f"turn 1, transition 2: answer ok → o{'k' * 58}…"


def test_a_changed_case_says_its_scores_end_states_divergence_and_each_regression():
    divergence = Divergence(1, 4, (Difference(4, "state", "verify", "select"),))
    change = CaseChange("refund", case("refund", 1.0), case("refund", 0.5, "fatal_error", "failure"), divergence,
                        ("score fell from 1.00 to 0.50", "ended in fatal_error, not verified_success"))
    assert str(change) == ("refund: score 1.00 → 0.50, ended in verified_success → fatal_error; diverges at turn 1, "
                           "transition 4: state verify → select\n"
                           "    REGRESSION: score fell from 1.00 to 0.50\n"
                           "    REGRESSION: ended in fatal_error, not verified_success")


def test_a_new_case_and_a_removed_case_say_so_with_their_score():
    assert str(CaseChange("added", None, case("added", 0.75))) == "added: new case, score 0.75"
    assert str(CaseChange("gone", case("gone", 0.25), None)) == "gone: not in this eval (score 0.25 before)"
    assert str(CaseChange("neither", None, None)) == "neither"


def test_the_comparison_heads_its_lines_with_both_scores_and_lists_only_the_cases_that_changed():
    same = CaseChange("same", case("same", 1.0), case("same", 1.0))
    fell = CaseChange("fell", case("fell", 1.0), case("fell", 0.0), None, ("score fell from 1.00 to 0.00",))
    report = str(Comparison((same, fell), (1.0, 0.5)))
    assert report == ("against the baseline: score 1.00 → 0.50; 1 of 2 cases changed, 1 regressed\n"
                      "  fell: score 1.00 → 0.00, ended in verified_success → verified_success\n"
                      "    REGRESSION: score fell from 1.00 to 0.00")


def test_a_case_whose_runs_took_more_turns_before_diverges_at_the_first_turn_one_side_lacks():
    from types import SimpleNamespace

    from forge import AgentLoop, Finish, Tool
    from forge.evals.compare import compare
    from forge.evals.results import EvalResults

    loop = AgentLoop([Tool("noop", {"noop"}, lambda: 1)], lambda goal, state: Finish("ok"), lambda o: True)
    turn = loop.run("hello")
    before = EvalResults("e", (case("chat", 1.0),), runs={"chat": SimpleNamespace(turns=[turn, turn])})
    after = EvalResults("e", (case("chat", 1.0),), runs={"chat": SimpleNamespace(turns=[turn])})
    [change] = compare(after, before).changes
    assert str(change.divergence) == "turn 2, transition 1: turns 2 → 1"
    assert change.divergence.differences[0].transition == 1


def test_a_case_only_the_baseline_has_is_listed_as_gone_and_is_no_regression():
    from forge.evals.compare import compare
    from forge.evals.results import EvalResults

    before = EvalResults("e", (case("kept", 1.0), case("gone", 0.25)))
    after = EvalResults("e", (case("kept", 1.0),))
    comparison = compare(after, before)
    assert [str(change) for change in comparison.changes] == ["kept: score 1.00 → 1.00, ended in verified_success → "
                                                              "verified_success", "gone: not in this eval (score 0.25 "
                                                              "before)"]
    assert comparison.regressions == ()


def _regressions(before, after):
    from forge.evals.compare import compare
    from forge.evals.results import EvalResults

    [change] = compare(EvalResults("e", (after,)), EvalResults("e", (before,))).changes
    return change.regressions


def test_an_assertion_that_no_longer_holds_is_named_with_its_reason_when_it_has_one():
    from dataclasses import replace

    held = replace(case("c", 1.0), assertions={"refunds": True, "polite": True})
    broken = replace(case("c", 1.0), assertions={"refunds": False, "polite": False}, reasons={"refunds": "none made"})
    assert _regressions(held, broken) == ("refunds no longer holds: none made", "polite no longer holds")


def test_a_case_that_could_not_run_before_either_is_no_new_regression():
    from dataclasses import replace

    failing = replace(case("c", 0.0), error="ImportError: no module named shop")
    assert _regressions(failing, failing) == ()
    assert _regressions(case("c", 0.0), failing) == ("the case no longer runs: ImportError: no module named shop",)
