"""forge ui's JSON API (`/api/`), spoken to with raw HTTP as a program would: runs listed
and read with their trace and journal, a waiting run answered and going on, cancelled and
forked, its events fed, and the same guard as the pages (token, Host, Origin, CSRF)."""

import http.client
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytest.importorskip("uvicorn", reason="the ui extra is a test dependency: python3 tasks.py test installs it")

import test_ui
from test_ui import SENT, TOKEN, approval_loop, csrf_of

from forge import AgentLoop, Finish

ui = test_ui.ui  # the fixture
README = (Path(__file__).resolve().parents[1] / "docs" / "ui.md").read_text(encoding="utf-8")


def call(port, method, path, body=None, *, token=TOKEN, headers=None, raw=None):
    """One request as given: the token as a bearer (token=None: none), a JSON body."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    sent = {"Host": f"127.0.0.1:{port}", **({"Authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
    data = raw
    if body is not None:
        data = json.dumps(body)
        sent.setdefault("Content-Type", "application/json")
    connection.request(method, path, body=data, headers=sent)
    response = connection.getresponse()
    text = response.read().decode()
    kind = response.getheader("content-type", "")
    return response.status, json.loads(text) if kind.startswith("application/json") else text


def waiting(make, run_id):
    durable = make(approval_loop())
    durable.run("pay bob", run_id=run_id)
    return durable


def test_the_api_lists_runs_with_their_status_and_what_they_wait_for(make, ui):
    waiting(make, "api-list")
    status, body = call(ui["port"], "GET", "/api/runs?status=waiting")
    assert status == 200
    row = next(row for row in body["runs"] if row["run_id"] == "api-list")
    assert (row["status"], row["reason"], row["goal"]) == ("waiting", "approval_required", "pay bob")
    assert row["question"] == 'may it call send({"to": "bob", "amount": 500})?'  # words, no Python (issue 54 item 5)
    assert all(each["status"] == "waiting" for each in body["runs"]) and body["more"] is False


def test_a_run_is_given_with_its_trace_journal_and_the_question_it_waits_on(make, ui):
    durable = waiting(make, "api-one")
    status, body = call(ui["port"], "GET", "/api/runs/api-one")
    assert status == 200
    assert body["waiting"]["state"] == "approval_required"
    assert body["waiting"]["fingerprint"] == durable.status("api-one").waiting.fingerprint
    assert body["waiting"]["arguments"] == {"to": "bob", "amount": 500}
    assert [record["dest"] for record in body["trace"]][-1] == "approval_required"
    fingerprint = body["waiting"]["fingerprint"]
    assert body["waiting"]["answers"] == [{"kind": "approve", "value": fingerprint},
                                          {"kind": "reject", "value": fingerprint}]
    assert [entry["kind"] for entry in body["journal"]][:1] == ["policy"]


def test_approving_through_the_api_makes_the_run_go_on(make, ui):
    SENT.clear()
    durable = waiting(make, "api-approve")
    asked = call(ui["port"], "GET", "/api/runs/api-approve")[1]["waiting"]
    status, body = call(ui["port"], "POST", "/api/runs/api-approve/answer",
                        {"kind": "approve", "value": asked["fingerprint"], "question": asked["asked"]})
    assert (status, body["answered"]) == (200, True)
    assert durable.wait("api-approve", timeout=30, answers=1).answer == "sent 500 to bob"
    assert call(ui["port"], "GET", "/api/runs/api-approve")[1]["status"] == "finished"


def test_approving_with_edited_arguments_through_the_api_runs_the_edited_call(make, ui):
    SENT.clear()
    durable = waiting(make, "api-edit")
    asked = call(ui["port"], "GET", "/api/runs/api-edit")[1]["waiting"]
    status, _ = call(ui["port"], "POST", "/api/runs/api-edit/answer",
                     {"kind": "approve", "value": asked["fingerprint"], "question": asked["asked"],
                      "arguments": {"to": "bob", "amount": 5}})
    assert status == 200
    assert durable.wait("api-edit", timeout=30, answers=1).answer == "sent 5 to bob"


def test_an_answer_to_a_question_no_longer_asked_is_a_conflict_saying_what_is_asked(make, ui):
    waiting(make, "api-stale")
    asked = call(ui["port"], "GET", "/api/runs/api-stale")[1]["waiting"]
    status, body = call(ui["port"], "POST", "/api/runs/api-stale/answer",
                        {"kind": "approve", "value": asked["fingerprint"], "question": asked["asked"] + 1})
    assert status == 409
    assert body["waiting"]["asked"] == asked["asked"] and body["status"] == "waiting"


def test_an_answer_that_does_not_fit_is_refused_naming_why(make, ui):
    waiting(make, "api-misfit")
    asked = call(ui["port"], "GET", "/api/runs/api-misfit")[1]["waiting"]
    status, body = call(ui["port"], "POST", "/api/runs/api-misfit/answer",
                        {"kind": "approve", "value": "0" * 64, "question": asked["asked"]})
    assert status == 400 and body["error"].startswith("not sent:") and "fingerprint" in body["error"]


def test_a_body_that_is_not_json_is_refused(make, ui):
    waiting(make, "api-notjson")
    status, body = call(ui["port"], "POST", "/api/runs/api-notjson/answer", raw="kind=approve",
                        headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert (status, body["error"]) == (400, "not sent: send the body as JSON, with Content-Type: application/json")


def test_a_json_body_that_is_not_an_object_is_refused(make, ui):
    waiting(make, "api-notobject")
    status, body = call(ui["port"], "POST", "/api/runs/api-notobject/answer", ["approve"])
    assert (status, body["error"]) == (400, "not sent: the body must be a JSON object")


def test_cancelling_through_the_api_stops_the_run(make, ui):
    durable = waiting(make, "api-cancel")
    status, body = call(ui["port"], "POST", "/api/runs/api-cancel/cancel", {})
    assert (status, body["cancelled"]) == (200, True)
    assert durable.status("api-cancel").status == "cancelled"


def test_forking_through_the_api_makes_a_run_that_names_its_parent(make, ui):
    durable = make(AgentLoop([test_ui.send], lambda goal, state: Finish("ok"), lambda o: True))
    durable.run("say ok", run_id="api-fork")
    status, body = call(ui["port"], "POST", "/api/runs/api-fork/fork", {"at": 1, "run_id": "api-fork-1"})
    assert (status, body) == (201, {"run_id": "api-fork-1", "forked_from": "api-fork", "at": 1})
    forked = call(ui["port"], "GET", "/api/runs/api-fork-1")[1]
    assert forked["forked_from"]["run_id"] == "api-fork"
    refused = call(ui["port"], "POST", "/api/runs/api-fork/fork", {"at": 0})
    assert refused == (400, {"error": "not forked: 'at' must be a transition number, 1 or more"})


def test_the_event_feed_gives_each_transition_then_what_the_run_waits_on(make, ui):
    waiting(make, "api-feed")
    status, text = call(ui["port"], "GET", "/api/runs/api-feed/events")
    assert status == 200
    events = [json.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: ")]
    assert [event["type"] for event in events][-2:] == ["waiting", "stopped"]
    assert events[0]["type"] == "transition" and events[0]["record"]["sequence"] == 1
    assert events[-1] == {"type": "stopped", "status": "waiting", "reason": "approval_required",
                          "summary": events[-1]["summary"]}


def test_an_unknown_run_and_an_unknown_route_are_json_404s(ui):
    status, body = call(ui["port"], "GET", "/api/runs/no-such-run")
    assert status == 404 and "no durable run 'no-such-run'" in body["error"]
    assert call(ui["port"], "GET", "/api/nothing") == (404, {"error": "no such API route: /api/nothing"})


def test_a_request_without_the_token_is_unauthorised_and_one_with_another_is_forbidden(ui):
    assert call(ui["port"], "GET", "/api/runs", token=None)[0] == 401
    assert call(ui["port"], "GET", "/api/runs", token="not-it")[0] == 403


@pytest.mark.parametrize(("how", "headers", "query"), [
    ("a wrong cookie", {"Cookie": "forge_ui=not-it"}, ""),
    ("a wrong ?token=", {}, "?token=not-it"),
    ("a wrong bearer", {"Authorization": "Bearer not-it"}, ""),
], ids=["cookie", "query", "bearer"])
def test_a_wrong_credential_of_each_kind_is_forbidden_for_reads_and_changes(make, ui, how, headers, query):
    SENT.clear()
    run_id = f"api-wrong-{how.split()[-1].strip('?=')}"
    waiting(make, run_id)
    assert call(ui["port"], "GET", "/api/runs" + query, token=None, headers=headers)[0] == 403, how
    status, body = call(ui["port"], "POST", f"/api/runs/{run_id}/cancel" + query, {}, token=None, headers=headers)
    assert status == 403 and "forbidden" in body["error"], how
    assert call(ui["port"], "GET", f"/api/runs/{run_id}")[1]["status"] == "waiting" and SENT == []


@pytest.mark.parametrize("route", ["answer", "cancel", "fork"])
def test_a_change_sent_with_no_credential_at_all_is_unauthorised_and_changes_nothing(make, ui, route):
    SENT.clear()
    waiting(make, f"api-bare-{route}")
    status, body = call(ui["port"], "POST", f"/api/runs/api-bare-{route}/{route}", {"kind": "approve"}, token=None)
    assert status == 401 and body["error"].startswith("no token"), route
    assert call(ui["port"], "GET", f"/api/runs/api-bare-{route}")[1]["status"] == "waiting" and SENT == []


def test_a_request_naming_a_foreign_host_is_refused(ui):
    status, body = call(ui["port"], "GET", "/api/runs", headers={"Host": "evil.example:80"})
    assert status == 400 and "does not serve the host" in body["error"]


def test_a_change_made_with_the_session_cookie_needs_the_pages_origin_and_csrf_token(make, ui):
    durable = waiting(make, "api-cookie")
    port = ui["port"]
    page = test_ui.request(port, "GET", "/runs/api-cookie")[1]
    cookie = {"Cookie": f"forge_ui={TOKEN}"}
    same = {"Origin": f"http://127.0.0.1:{port}"}
    assert call(port, "POST", "/api/runs/api-cookie/cancel", {}, token=None, headers=cookie)[0] == 403
    assert call(port, "POST", "/api/runs/api-cookie/cancel", {}, token=None, headers={**cookie, **same})[0] == 403
    assert durable.status("api-cookie").status == "waiting"
    status, _ = call(port, "POST", "/api/runs/api-cookie/cancel", {}, token=None,
                     headers={**cookie, **same, "X-CSRF-Token": csrf_of(page)})
    assert status == 200 and durable.status("api-cookie").status == "cancelled"


def test_a_change_made_with_the_session_cookie_from_another_origin_is_refused_even_with_its_csrf_token(make, ui):
    durable = waiting(make, "api-elsewhere")
    port = ui["port"]
    page = test_ui.request(port, "GET", "/runs/api-elsewhere")[1]
    status, body = call(port, "POST", "/api/runs/api-elsewhere/cancel", {}, token=None,
                        headers={"Cookie": f"forge_ui={TOKEN}", "Origin": "http://evil.example",
                                 "X-CSRF-Token": csrf_of(page)})
    assert status == 403 and "must come from this page (Origin)" in body["error"]
    assert durable.status("api-elsewhere").status == "waiting"


def test_a_read_only_ui_serves_no_change_through_the_api(make, ui):
    waiting(make, "api-read-only")
    status, body = call(ui["read_only_port"], "POST", "/api/runs/api-read-only/cancel", {})
    assert (status, body["error"]) == (404, "no such API route: /api/runs/api-read-only/cancel")
    assert call(ui["read_only_port"], "GET", "/api/runs/api-read-only")[0] == 200


def test_the_readmes_curl_examples_answer_a_waiting_run(make, ui, tmp_path):
    if shutil.which("curl") is None or shutil.which("jq") is None:
        pytest.skip("curl and jq are not installed (python3 tasks.py test installs them)")
    SENT.clear()
    durable = waiting(make, "api-curl")
    section = README.split("### The JSON API", 1)[1].split("\n#", 1)[0]
    commands = [line for line in re.findall(r"```bash\n(.*?)```", section, re.S)[0].splitlines()
                if line.strip() and not line.startswith("#")]
    environment = {"PATH": "/usr/bin:/bin", "URL": f"http://127.0.0.1:{ui['port']}", "TOKEN": TOKEN,
                   "RUN": "api-curl"}
    outputs = [subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=environment, timeout=60,
                              cwd=tmp_path) for command in commands]
    assert all(done.returncode == 0 for done in outputs), [done.stderr for done in outputs]
    assert durable.wait("api-curl", timeout=30, answers=1).answer == "sent 500 to bob"
    assert '"run_id": "api-curl"' in outputs[0].stdout.replace('":"', '": "')
    assert '"type":"stopped"' in outputs[3].stdout.replace(": ", ":")


def test_an_answer_that_names_no_question_is_a_bad_request_not_a_conflict(make, ui):
    waiting(make, "api-noquestion")
    asked = call(ui["port"], "GET", "/api/runs/api-noquestion")[1]["waiting"]
    status, body = call(ui["port"], "POST", "/api/runs/api-noquestion/answer",
                        {"kind": "approve", "value": asked["fingerprint"]})
    assert status == 400 and "which question it answers" in body["error"]


def test_a_search_longer_than_the_limit_is_refused_as_json_naming_the_limit(ui):
    from forge.durable.runs import SEARCH_LIMIT

    status, body = call(ui["port"], "GET", "/api/runs?q=" + "a%25" * 25_000)
    assert status == 400 and body["error"] == f"a search is at most {SEARCH_LIMIT} characters, got 50,000"


def test_a_search_at_the_limit_is_answered(ui):
    from forge.durable.runs import SEARCH_LIMIT

    status, body = call(ui["port"], "GET", "/api/runs?q=" + "x%25_" * (SEARCH_LIMIT // 3))
    assert status == 200 and body["runs"] == []


def test_the_runs_page_refuses_a_search_longer_than_the_limit_on_its_own_page(ui):
    status, text = test_ui.request(ui["port"], "GET", "/?q=" + "a" * 50_000)[:2]
    assert status == 400 and "a search is at most 200 characters" in text


def test_an_internal_error_of_the_api_is_answered_as_json(ui, monkeypatch):
    from forge.durable.runs import StoredRuns

    def broken(self, run_id):
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(StoredRuns, "get", broken)
    status, body = call(ui["port"], "GET", "/api/runs/anything")
    assert status == 500 and body == {"error": "internal error (RuntimeError); the server's log has the details"}
