"""forge ui against odd and hostile input: a stale answer form, an unknown run's feed, run
ids with `/` and goals that are not valid Unicode, and malformed or deeply nested JSON. A
real uvicorn server on 127.0.0.1 over a real DBOS SQLite database (test_ui's fixtures)."""

import pytest

pytest.importorskip("uvicorn", reason="the ui extra is a test dependency: python3 tasks.py test installs it")

import test_ui
from test_ui import csrf_of, field_of, post_answer, request, send, sender

from forge import AgentLoop, Ask, Finish
from forge.ui.pages import run_path

ui = test_ui.ui  # the fixture: a real uvicorn server, and a read-only one

ORIGIN = "Origin"


def two_questions(goal, state):
    if not state.observations:
        return Ask("First question: which city?")
    if len(state.observations) == 1:
        return Ask("Second question: which day?")
    return Finish(f"done: {goal}")


def post(port, path, form, page_path):
    _, page, _ = request(port, "GET", page_path)
    return request(port, "POST", path, headers={ORIGIN: f"http://127.0.0.1:{port}"},
                   form={"csrf": csrf_of(page), **form})


def test_a_form_made_for_one_question_is_refused_on_the_next_saying_what_is_asked_now(make, ui):
    durable = make(AgentLoop([send], two_questions, lambda o: o.tool_name == "finish"))
    durable.run("plan", run_id="stale-1")
    _, page, _ = request(ui["port"], "GET", "/runs/stale-1")
    first = field_of(page, "question")
    assert post_answer(ui["port"], "stale-1", {"kind": "text", "value": "Oslo"})[0] == 303
    assert "Second question: which day?" in durable.wait("stale-1", timeout=30, answers=1).waiting.question
    status, answer, _ = post(ui["port"], "/runs/stale-1/answer", {"kind": "text", "value": "Monday", "question": first},
                             "/runs/stale-1")
    assert status == 409
    assert "that form answered question 1" in answer and "It now asks question 2" in answer and "which day?" in answer
    still = durable.status("stale-1")
    assert still.status == "waiting" and still.waiting.asked == 2  # nothing was taken for the second question


def test_an_answer_form_without_its_question_is_refused(make, ui):
    durable = make(AgentLoop([send], two_questions, lambda o: o.tool_name == "finish"))
    durable.run("plan", run_id="stale-2")
    status, answer, _ = post(ui["port"], "/runs/stale-2/answer", {"kind": "text", "value": "Oslo"}, "/runs/stale-2")
    assert status == 400 and "which question it answers" in answer
    assert durable.status("stale-2").waiting.asked == 1


def test_the_feed_of_an_unknown_run_is_a_404_and_writes_nothing(make, ui, db):
    from forge.durable.runs import StoredRuns

    status, body, _ = request(ui["port"], "GET", "/runs/no-such-run/events")
    assert status == 404 and "no-such-run" in body
    with StoredRuns(str(db)) as runs:
        assert runs.database.watched(["no-such-run"]) == set()


@pytest.mark.parametrize("run_id", ["team/a/1", "ends/events", "a?b#c", "100%/x"])
def test_a_run_id_with_a_slash_or_an_odd_character_has_working_routes(make, ui, run_id):
    durable = make(AgentLoop([send], two_questions, lambda o: o.tool_name == "finish"))
    durable.run("plan", run_id=run_id)
    status, page, _ = request(ui["port"], "GET", run_path(run_id))
    assert status == 200 and "First question: which city?" in page
    status, _, _ = request(ui["port"], "GET", run_path(run_id, "/events") + "?seen=x")
    assert status == 200
    origin = {ORIGIN: f"http://127.0.0.1:{ui['port']}"}
    status, _, headers = request(ui["port"], "POST", run_path(run_id, "/answer"), headers=origin,
                                 form={"csrf": csrf_of(page), "question": field_of(page, "question"), "kind": "text",
                                       "value": "Oslo"})
    assert status == 303 and headers["location"].startswith(run_path(run_id) + "?")
    assert durable.wait(run_id, timeout=30, answers=1).waiting.asked == 2


def test_a_run_whose_goal_is_not_valid_unicode_breaks_no_page(make, ui):
    durable = make(AgentLoop([send], lambda goal, state: Finish("ok"), lambda o: True))
    durable.run("pay \udcff someone", run_id="surrogate-goal")
    durable.run("an ordinary goal", run_id="ordinary-goal")
    for path in ("/", "/?q=ordinary", "/?q=someone", "/?status=finished", "/runs/surrogate-goal", "/inbox"):
        status, page, _ = request(ui["port"], "GET", path)
        assert status == 200, (path, page[:300])
    _, listing, _ = request(ui["port"], "GET", "/")
    assert "pay \\udcff someone" in listing and "an ordinary goal" in listing


@pytest.mark.parametrize(("field", "text", "said"), [
    ("patch", "[" * 100_000, "the patch nests too deeply"),
    ("patch", "{not json", "the patch is not JSON: Expecting property name"),
])
def test_a_fork_patch_that_is_not_readable_json_is_a_400_saying_why(make, ui, field, text, said):
    durable = make(AgentLoop([send], lambda goal, state: Finish("ok"), lambda o: True))
    durable.run("finish", run_id=f"fork-json-{len(text)}")
    status, body, _ = post(ui["port"], f"/runs/fork-json-{len(text)}/fork", {"at": "1", field: text},
                           f"/runs/fork-json-{len(text)}")
    assert status == 400 and said in body


def test_edited_arguments_nested_too_deeply_are_a_400_saying_why(make, ui):
    durable = make(AgentLoop([send], sender, lambda o: o.tool_name == "finish", definition="approval",
                             approver=lambda request: None))
    durable.run("pay bob", run_id="deep-args")
    fingerprint = durable.status("deep-args").waiting.fingerprint
    status, body, _ = post_answer(ui["port"], "deep-args", {"kind": "approve", "value": fingerprint,
                                                            "arguments": "[" * 100_000})
    assert status == 400 and "the edited arguments nests too deeply" in body
    assert durable.status("deep-args").status == "waiting"


def test_run_path_quotes_a_slash_and_a_lone_surrogate():
    assert run_path("a/b") == "/runs/a%2Fb"
    assert run_path("x\udcff") == "/runs/x%ED%B3%BF"
