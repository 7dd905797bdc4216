"""The UI's layers of defence, each on its own: a state-changing request that lacks the
token (or names a foreign Host) is refused even with a valid Origin and CSRF token, and
changes nothing in the runs database. A real uvicorn server (test_ui's fixtures)."""

import http.client
import json
from urllib.parse import urlencode

import pytest

pytest.importorskip("uvicorn", reason="the ui extra is a test dependency: python3 tasks.py test installs it")

import test_ui
from test_ui import csrf_of, field_of, request, send, sender

from forge import AgentLoop

ui = test_ui.ui  # the fixture


def raw_post(port, path, form, headers):
    """A POST exactly as given: no token added, no cookie."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("POST", path, body=urlencode(form),
                       headers={"Content-Type": "application/x-www-form-urlencoded", **headers})
    response = connection.getresponse()
    return response.status, response.read().decode()


def waiting_run(make, run_id):
    durable = make(AgentLoop([send], sender, lambda o: o.tool_name == "finish", definition="approval",
                             approver=lambda request: None))
    durable.run("pay bob", run_id=run_id)
    return durable


@pytest.mark.parametrize("route", ["answer", "cancel", "fork"])
def test_a_post_without_the_token_is_refused_and_changes_nothing(make, ui, route):
    run_id = f"guard-token-{route}"
    durable = waiting_run(make, run_id)
    port = ui["port"]
    _, page, _ = request(port, "GET", f"/runs/{run_id}")  # a real page: its CSRF token and question are valid
    form = {"csrf": csrf_of(page), "question": field_of(page, "question"), "kind": "approve",
            "value": durable.status(run_id).waiting.fingerprint, "at": "1"}
    status, body = raw_post(port, f"/runs/{run_id}/{route}", form,
                            {"Host": f"127.0.0.1:{port}", "Origin": f"http://127.0.0.1:{port}"})
    assert status == 403 and "token" in body
    after = durable.status(run_id)
    assert after.status == "waiting" and after.answers == 0
    _, listing, _ = request(port, "GET", "/?q=" + run_id)
    assert listing.count('data-run="') == 1  # the run itself, and no fork of it


@pytest.mark.parametrize("route", ["answer", "cancel", "fork"])
def test_a_post_naming_a_foreign_host_is_refused_and_changes_nothing(make, ui, route):
    run_id = f"guard-host-{route}"
    durable = waiting_run(make, run_id)
    port = ui["port"]
    _, page, _ = request(port, "GET", f"/runs/{run_id}")
    form = {"csrf": csrf_of(page), "question": field_of(page, "question"), "kind": "approve",
            "value": durable.status(run_id).waiting.fingerprint, "at": "1"}
    status, body, _ = request(port, "POST", f"/runs/{run_id}/{route}", host=f"evil.example:{port}",
                              headers={"Origin": f"http://evil.example:{port}"}, form=form)
    assert status == 400 and "does not serve the host" in body
    after = durable.status(run_id)
    assert after.status == "waiting" and after.answers == 0
    _, listing, _ = request(port, "GET", "/?q=" + run_id)
    assert listing.count('data-run="') == 1  # the run itself, and no fork of it


def test_a_post_from_the_page_with_only_a_referer_is_taken_as_from_the_page(make, ui):
    """A browser that sends no Origin sends the page as Referer: the same check holds on it."""
    run_id = "guard-referer"
    durable = waiting_run(make, run_id)
    port = ui["port"]
    _, page, _ = request(port, "GET", f"/runs/{run_id}")
    form = {"csrf": csrf_of(page), "question": field_of(page, "question")}
    elsewhere = request(port, "POST", f"/runs/{run_id}/cancel", form=form,
                        headers={"Referer": "http://evil.example/page"})[0]
    assert elsewhere == 403 and durable.status(run_id).status == "waiting"
    status = request(port, "POST", f"/runs/{run_id}/cancel", form=form,
                     headers={"Referer": f"http://127.0.0.1:{port}/runs/{run_id}"})[0]
    assert status == 303 and durable.status(run_id).status == "cancelled"


def test_no_page_may_be_framed_by_another_site(ui):
    _, _, headers = request(ui["port"], "GET", "/")
    assert headers["x-frame-options"] == "DENY" and "frame-ancestors 'none'" in headers["content-security-policy"]


@pytest.mark.parametrize("path", ["/", "/inbox", "/runs/nope", "/runs/nope/events", "/loops/x", "/no-such-page"])
def test_every_path_is_refused_without_the_token_and_sets_no_cookie(ui, path):
    """The guard is the app's outermost layer: a path no route serves is refused too."""
    status, body, headers = request(ui["port"], "GET", path, token=None)
    assert status == 403 and "open the URL forge ui printed" in body
    assert "set-cookie" not in {name.lower() for name in headers}


@pytest.mark.parametrize("path", ["/inbox", "/runs/nope", "/no-such-page"])
def test_every_page_served_may_not_be_framed_and_keeps_the_session(ui, path):
    _, _, headers = request(ui["port"], "GET", path)
    shown = {name.lower(): value for name, value in headers.items()}
    assert shown["x-frame-options"] == "DENY" and "frame-ancestors 'none'" in shown["content-security-policy"]
    assert shown["set-cookie"].startswith("forge_ui=") and "httponly" in shown["set-cookie"].lower()


def test_the_api_answers_a_refusal_in_json_and_sets_no_cookie(ui):
    status, body, headers = request(ui["port"], "GET", "/api/anything", token=None)
    assert status == 401 and json.loads(body) == {
        "error": "no token: send Authorization: Bearer TOKEN (the token forge ui printed)"}
    assert "set-cookie" not in {name.lower() for name in headers}
