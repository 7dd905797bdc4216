"""`forge ui` over a real uvicorn server on 127.0.0.1 and a real DBOS SQLite database with runs
this test makes (finished, waiting, running): the runs list, a run's page, the inbox, the
answers that make a run go on, and the security of a page that can approve side effects,
checked with raw HTTP requests."""

import http.client
import json
import socket
import subprocess
import sys
import threading
import time
from urllib.parse import urlencode

import pytest

pytest.importorskip("uvicorn", reason="the ui extra is a test dependency: python3 tasks.py test installs it")

import uvicorn
from durable_agent import calls_made

from forge import AgentLoop, Ask, Finish, Intent, tool
from forge.durable import Answer
from forge.ui.app import create_app

TOKEN = "t0ken-for-tests"
SENT: list[dict] = []
RELEASE = threading.Event()


@tool(side_effect=True)
def send(to: str, amount: int) -> str:
    """Send an amount to someone."""
    SENT.append({"to": to, "amount": amount})
    return f"sent {amount} to {to}"


@tool
def slow(n: int) -> int:
    """Its second call waits until the test lets it go."""
    if n == 2:
        RELEASE.wait(30)
    return n


def sender(goal, state):
    return Intent.call("send", to="bob", amount=500) if not state.observations else Finish(state.observations[-1].payload)


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def ui(db):
    servers = {}
    for read_only, at in ((False, free_port()), (True, free_port())):
        app = create_app(str(db), TOKEN, hosts={f"127.0.0.1:{at}", f"localhost:{at}"}, read_only=read_only)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=at, log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.02)
        servers[read_only] = (server, thread, at)
    yield {"port": servers[False][2], "read_only_port": servers[True][2]}
    for server, thread, _ in servers.values():
        server.should_exit = True
        thread.join(10)


def request(port, method, path, *, token=TOKEN, host=None, headers=None, form=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    query = ("&" if "?" in path else "?") + urlencode({"token": token}) if token else ""
    sent = {"Host": host or f"127.0.0.1:{port}", **(headers or {})}
    body = None
    if form is not None:
        body = urlencode(form)
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    connection.request(method, path + query, body=body, headers=sent)
    response = connection.getresponse()
    return response.status, response.read().decode(), dict(response.getheaders())


def csrf_of(page):
    marker = 'name="csrf" value="'
    start = page.index(marker) + len(marker)
    return page[start:page.index('"', start)]


def approval_loop():
    return AgentLoop([send], sender, lambda o: o.tool_name == "finish", definition="approval",
                     approver=lambda request: None)


def field_of(page, name):
    marker = f'name="{name}" value="'
    start = page.index(marker) + len(marker)
    return page[start:page.index('"', start)]


def post_answer(port, run_id, form):
    """Post `form` as the run's page's answer form does: with the CSRF token and the
    question the page asks."""
    _, page, _ = request(port, "GET", f"/runs/{run_id}")
    origin = {"Origin": f"http://127.0.0.1:{port}"}
    return request(port, "POST", f"/runs/{run_id}/answer", headers=origin,
                   form={"csrf": csrf_of(page), "question": field_of(page, "question"), **form})


# --- what it shows ---------------------------------------------------------------------


def test_the_runs_list_shows_every_run_newest_first_with_its_status_and_steps(make, ui):
    durable = make(AgentLoop([send], lambda goal, state: Finish("ok"), lambda o: True))
    durable.run("first goal", run_id="list-1")
    durable.run("second goal", run_id="list-2")
    status, page, _ = request(ui["port"], "GET", "/")
    assert status == 200
    assert page.index('data-run="list-2"') < page.index('data-run="list-1"')
    assert "second goal" in page and "finished · verified_success" in page


def test_the_runs_list_filters_by_status_and_end_state_and_searches_goal_and_id(make, ui):
    durable = make(approval_loop())
    durable.run("pay bob for lunch", run_id="filter-wait")
    make(AgentLoop([send], lambda goal, state: Finish("ok"), lambda o: True)).run("pay nobody", run_id="filter-done")
    _, waiting, _ = request(ui["port"], "GET", "/?status=waiting")
    assert 'data-run="filter-wait"' in waiting and 'data-run="filter-done"' not in waiting
    _, ended, _ = request(ui["port"], "GET", "/?reason=verified_success")
    assert 'data-run="filter-done"' in ended and 'data-run="filter-wait"' not in ended
    _, found, _ = request(ui["port"], "GET", "/?q=LUNCH")
    assert 'data-run="filter-wait"' in found and 'data-run="filter-done"' not in found
    _, by_id, _ = request(ui["port"], "GET", "/?q=filter-do")
    assert 'data-run="filter-done"' in by_id
    assert request(ui["port"], "GET", "/?status=sleeping")[0] == 400


def test_the_runs_list_is_paged(make, ui):
    durable = make(AgentLoop([send], lambda goal, state: Finish("ok"), lambda o: True))
    for number in range(55):
        durable.start(f"paged goal {number}", run_id=f"paged-{number:02d}")
    for number in range(55):
        durable.wait(f"paged-{number:02d}", timeout=30)
    _, first, _ = request(ui["port"], "GET", "/?q=paged-")
    _, second, _ = request(ui["port"], "GET", "/?q=paged-&page=1")
    shown = [first.count('data-run="paged-'), second.count('data-run="paged-')]
    assert shown == [50, 5] and 'rel="next"' in first and 'rel="next"' not in second


def test_a_runs_page_shows_the_inspector_the_answer_and_the_conversation(make, ui):
    def talker(goal, state):
        state.messages.append({"role": "assistant", "content": "hello <b>there</b>",
                               "_usage": {"prompt_tokens": 12, "completion_tokens": 3}})
        return Finish("done talking")

    make(AgentLoop([send], talker, lambda o: True)).run("say hello", run_id="talk-1")
    status, page, _ = request(ui["port"], "GET", "/runs/talk-1")
    assert status == 200 and 'class="forge-inspector"' in page
    assert "answer: done talking" in page
    assert 'id="conversation"' in page and "15 tokens" in page and "12 prompt + 3 completion" in page
    assert "hello &lt;b&gt;there&lt;/b&gt;" in page


def test_a_runs_page_says_what_each_model_call_and_the_conversation_cost(make, ui):
    def talker(goal, state):
        state.messages.append({"role": "assistant", "content": "hello",
                               "_usage": {"prompt_tokens": 20_000, "completion_tokens": 1_000, "model": "gpt-4o-mini"}})
        return Finish("done")

    make(AgentLoop([send], talker, lambda o: True)).run("say hello", run_id="priced-1")
    _, page, _ = request(ui["port"], "GET", "/runs/priced-1")
    assert "20000 prompt + 1000 completion tokens, $0.0036]" in page and "conversation · 21000 tokens · $0.0036" in page


def test_a_runs_page_nests_each_child_run_under_the_transition_that_called_it(make, ui):
    from forge.user_code import import_file

    example = import_file(__import__("pathlib").Path(__file__).parents[1] / "examples" / "writer.py")
    finished_run = make(example.writer).run("a short article on how marine mammals sleep", run_id="writer-1")
    assert [child.path for child in finished_run.children] == ["writer-1/research.1", "writer-1/research.2"]
    status, page, _ = request(ui["port"], "GET", "/runs/writer-1")
    assert status == 200 and page.count('class="forge-inspector"') == 3  # the writer's, and one per child
    assert 'data-path="writer-1/research.2"' in page and "research at transition" in page


def test_the_inbox_lists_the_runs_that_wait_with_their_question(make, ui):
    make(approval_loop()).run("pay bob", run_id="inbox-1")
    _, page, _ = request(ui["port"], "GET", "/inbox")
    assert 'data-run="inbox-1"' in page and "may it call send(" in page


def inbox_entry(page, run_id):
    """The part of the inbox page about `run_id`."""
    start = page.index(f'<div class="box" data-run="{run_id}">')
    return page[start:page.index("</div>", page.index("</section>", start))]


def test_a_waiting_runs_page_asks_in_words_with_the_fingerprint_short_and_no_python(make, ui):
    durable = make(approval_loop())
    durable.run("pay bob", run_id="words")
    fingerprint = durable.status("words").waiting.fingerprint
    _, page, _ = request(ui["port"], "GET", "/runs/words")
    answer = page[page.index('id="answer"'):page.index("</section>", page.index('id="answer"'))]
    assert "may it call send({&quot;to&quot;: &quot;bob&quot;, &quot;amount&quot;: 500})?" in answer
    assert f"<summary>call {fingerprint[:12]}…</summary><code>{fingerprint}</code>" in answer
    where = page.find("Answer.")
    assert where < 0, page[where - 200:where + 80]
    assert "ended in approval_required" not in page
    assert "waits in approval_required for an answer" in page


def looker_then_sender(goal, state):
    done = len(state.observations)
    if done < 2:
        return Intent.call("slow", n=1)
    return Intent.call("send", to="bob", amount=500) if done == 2 else Finish(state.observations[-1].payload)


def test_a_waiting_run_counts_the_same_steps_in_the_list_and_on_its_page_and_says_the_step_it_waits_in(make, ui):
    make(AgentLoop([slow, send], looker_then_sender, lambda o: o.tool_name == "finish", definition="approval",
                   approver=lambda request: None)).run("look twice, then pay bob", run_id="steps-alike")
    _, listed, _ = request(ui["port"], "GET", "/?q=steps-alike")
    row = listed[listed.index('data-run="steps-alike"'):]
    assert row.split("</td>")[4] == "<td>2"  # two steps taken: the two looks
    _, page, _ = request(ui["port"], "GET", "/runs/steps-alike")
    assert '"steps":2,' in page and "waits in approval_required for an answer, in step 3" in page


def test_the_list_shows_a_runs_time_working_and_waiting_for_a_person_apart(make, ui):
    durable = make(approval_loop())
    durable.run("pay bob", run_id="timed")
    _, listed, _ = request(ui["port"], "GET", "/?q=timed")
    cell = listed[listed.index('data-run="timed"'):].split("</td>")[6]
    assert " working · waits since " in cell and "waiting" not in cell.split(" · ")[0]
    time.sleep(1.2)
    durable.resume("timed", Answer.approve(durable.status("timed").waiting.fingerprint))
    durable.wait("timed", timeout=30, answers=1)
    _, listed, _ = request(ui["port"], "GET", "/?q=timed")
    cell = listed[listed.index('data-run="timed"'):].split("</td>")[6]
    working, waiting = cell.removeprefix("<td>").split(", ")
    assert working.endswith(" working") and waiting.endswith(" s waiting") and float(waiting.split()[0]) >= 1.2


def test_the_inbox_shows_each_waiting_call_with_its_arguments_and_the_answers_that_fit(make, ui):
    make(approval_loop()).run("pay bob", run_id="inbox-call")
    _, page, _ = request(ui["port"], "GET", "/inbox")
    entry = inbox_entry(page, "inbox-call")
    assert "call <code>send</code> with <code>{&quot;to&quot;: &quot;bob&quot;, &quot;amount&quot;: 500}</code>" in entry
    assert 'value="approve"' in entry and 'value="reject"' in entry and 'name="back" value="inbox"' in entry


def test_approving_from_the_inbox_makes_the_run_go_on_and_returns_to_the_inbox(make, ui):
    SENT.clear()
    durable = make(approval_loop())
    durable.run("pay bob", run_id="inbox-approve")
    port = ui["port"]
    _, page, _ = request(port, "GET", "/inbox")
    entry = inbox_entry(page, "inbox-approve")
    status, _, headers = request(port, "POST", "/runs/inbox-approve/answer", headers={"Origin": f"http://127.0.0.1:{port}"},
                                 form={"csrf": csrf_of(page), "question": field_of(entry, "question"), "back": "inbox",
                                       "kind": "approve", "value": field_of(entry, "value")})
    assert status == 303 and headers["location"].startswith("/inbox?") and "run=inbox-approve" in headers["location"]
    assert durable.wait("inbox-approve", timeout=30, answers=1).answer == "sent 500 to bob"
    _, after, _ = request(port, "GET", headers["location"].split("?")[0] + "?done=answered&run=inbox-approve")
    assert "Answered inbox-approve." in after and 'data-run="inbox-approve"' not in after


def test_a_question_is_answered_from_the_inbox(make, ui):
    def asker(goal, state):
        return Ask("Whom should I pay?") if not state.observations else Finish(f"paying {goal}")

    durable = make(AgentLoop([send], asker, lambda o: o.tool_name == "finish"))
    durable.run("pay someone", run_id="inbox-ask")
    port = ui["port"]
    _, page, _ = request(port, "GET", "/inbox")
    entry = inbox_entry(page, "inbox-ask")
    assert "Whom should I pay?" in entry and 'placeholder="your reply"' in entry
    status, _, _ = request(port, "POST", "/runs/inbox-ask/answer", headers={"Origin": f"http://127.0.0.1:{port}"},
                           form={"csrf": csrf_of(page), "question": field_of(entry, "question"), "back": "inbox",
                                 "kind": "text", "value": "carol"})
    assert status == 303
    assert durable.wait("inbox-ask", timeout=30, answers=1).answer == "paying carol"


def test_the_navigation_says_how_many_runs_wait(make, ui):
    make(approval_loop()).run("pay bob", run_id="nav-count")
    _, page, _ = request(ui["port"], "GET", "/")
    counted = int(page.split('id="waiting-count">', 1)[1].split("<", 1)[0])
    _, inbox, _ = request(ui["port"], "GET", "/inbox")
    assert counted >= 1 and f"waiting for you: {counted}</h2>" in inbox


# --- answering -------------------------------------------------------------------------


def test_approving_from_the_page_makes_the_run_go_on(make, ui):
    SENT.clear()
    durable = make(approval_loop())
    durable.run("pay bob", run_id="approve-1")
    fingerprint = durable.status("approve-1").waiting.fingerprint
    status, _, headers = post_answer(ui["port"], "approve-1", {"kind": "approve", "value": fingerprint})
    assert status == 303 and "done=answered" in headers["location"]
    assert durable.wait("approve-1", timeout=30, answers=1).answer == "sent 500 to bob"


def test_approving_with_edited_arguments_runs_the_edited_call(make, ui):
    SENT.clear()
    durable = make(approval_loop())
    durable.run("pay bob", run_id="approve-edit")
    fingerprint = durable.status("approve-edit").waiting.fingerprint
    refused = post_answer(ui["port"], "approve-edit", {"kind": "approve", "value": fingerprint,
                                                       "arguments": '{"to": "bob"}'})
    assert refused[0] == 400 and "missing: amount" in refused[1]
    done = post_answer(ui["port"], "approve-edit", {"kind": "approve", "value": fingerprint,
                                                    "arguments": '{"to": "bob", "amount": 5}'})
    assert done[0] == 303
    assert durable.wait("approve-edit", timeout=30, answers=1).answer == "sent 5 to bob" and SENT == [{"to": "bob", "amount": 5}]


def test_a_question_is_answered_with_text_from_the_page(make, ui):
    def asker(goal, state):
        if not state.observations:
            return Ask("Whom should I pay?")
        return Finish(f"paying {goal}")

    durable = make(AgentLoop([send], asker, lambda o: o.tool_name == "finish"))
    durable.run("pay someone", run_id="ask-ui")
    _, page, _ = request(ui["port"], "GET", "/runs/ask-ui")
    assert "Whom should I pay?" in page and 'name="kind" value="text"' in page
    assert post_answer(ui["port"], "ask-ui", {"kind": "text", "value": "carol"})[0] == 303
    assert durable.wait("ask-ui", timeout=30, answers=1).answer == "paying carol"


def test_an_answer_with_no_worker_live_says_what_to_start(make, ui, db):
    durable = make(approval_loop())
    durable.run("pay bob", run_id="no-worker")
    fingerprint = durable.status("no-worker").waiting.fingerprint
    _, _, headers = post_answer(ui["port"], "no-worker", {"kind": "approve", "value": fingerprint})
    assert "served=0" in headers["location"]
    _, page, _ = request(ui["port"], "GET", headers["location"].split("?")[0] + "?done=answered&served=0")
    assert "No forge worker is live" in page and f"forge worker --db {db} --loops MODULE" in page


def test_a_page_opened_after_an_answer_follows_the_run_and_offers_no_answer_again(make, ui):
    durable = make(approval_loop())
    durable.run("pay bob", run_id="follow-page")
    asked = durable.status("follow-page").waiting.asked
    _, page, _ = request(ui["port"], "GET", f"/runs/follow-page?done=answered&answered={asked}")
    assert 'id="following"' in page and 'value="approve"' not in page
    assert "new EventSource(" in page and f"answered={asked}" in page
    _, other, _ = request(ui["port"], "GET", f"/runs/follow-page?done=answered&answered={asked + 1}")
    assert 'id="following"' not in other and 'value="approve"' in other  # another question's answer: ask this one


def test_a_following_page_is_told_when_the_run_takes_the_answer_up(make, ui, monkeypatch):
    from forge.durable import Answer
    from forge.durable.runs import StoredRuns

    looked = []
    read = StoredRuns.get
    monkeypatch.setattr(StoredRuns, "get", lambda self, run_id: looked.append(run_id) or read(self, run_id))
    durable = make(approval_loop())
    durable.run("pay bob", run_id="follow-feed")
    waiting = durable.status("follow-feed").waiting
    _, page, _ = request(ui["port"], "GET", f"/runs/follow-feed?done=answered&answered={waiting.asked}")
    feed = json.loads(page.split("new EventSource(", 1)[1].split(")", 1)[0])
    connection = http.client.HTTPConnection("127.0.0.1", ui["port"], timeout=30)
    connection.request("GET", feed, headers={"Host": f"127.0.0.1:{ui['port']}"})
    response = connection.getresponse()
    told = []
    reader = threading.Thread(target=lambda: told.extend(sse_messages(response)))
    reader.start()
    polled = looked.count("follow-feed")
    for _ in range(600):  # a bound on the wait, not a speed claim: the feed looks at the run again and again
        if looked.count("follow-feed") >= polled + 3:
            break
        time.sleep(0.05)
    assert looked.count("follow-feed") >= polled + 3  # the feed looked three times more while the run waits:
    assert reader.is_alive() and told == []  # nothing told, and it does not end
    durable.resume("follow-feed", Answer.approve(waiting.fingerprint).to(waiting))
    reader.join(30)
    assert [event for event, _ in told] == ["message"]  # told once, then the feed ended
    assert durable.wait("follow-feed", timeout=30, answers=1).answer == "sent 500 to bob"


def test_an_error_is_a_page_in_the_apps_style_saying_what_to_do(make, ui):
    durable = make(approval_loop())
    durable.run("pay bob", run_id="error-page")
    status, page, headers = post_answer(ui["port"], "error-page", {"kind": "approve", "value": "0" * 64})
    assert status == 400 and headers["content-type"].startswith("text/html")
    assert 'id="error-page"' in page and "<header>" in page and "not sent:" in page
    assert 'href="/runs/error-page?token=' in page  # back to the run


def test_a_refusal_for_a_missing_token_is_a_page_that_gives_no_token_away(ui):
    status, page, _ = request(ui["port"], "GET", "/", token=None)
    assert status == 403 and 'id="error-page"' in page
    assert TOKEN not in page and "Open the URL" in page


def text_of(driver, selector):
    """The text of the element `selector` picks, read in one script: atomic against the
    page being replaced as the run moves (an element found, then read, may belong to the
    document just replaced); None while there is none."""
    return driver.execute_script("var e = document.querySelector(arguments[0]); return e && e.textContent.trim()",
                                 selector)


def page_wait(driver, poll_frequency=0.5):
    """A wait on a page that reloads as its run moves: an element read as the page is
    replaced (stale) or before it is there is read again at the next poll."""
    from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, 30, poll_frequency=poll_frequency,
                         ignored_exceptions=(NoSuchElementException, StaleElementReferenceException))


def need_chromium():
    """Fail the test (never skip it: Chromium is a real part tasks.py installs) where a
    headless Chromium cannot be driven, saying why."""
    from browser import why_no_browser

    reason = why_no_browser()
    if reason is not None:
        pytest.fail(f"the browser tests need Chromium: {reason}")


def sse_messages(response):
    """The (event, data) messages of a server-sent event stream, until it ends."""
    event, data = "message", None
    while True:
        line = response.fp.readline().decode()
        if not line:
            return
        if line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data = json.loads(line[5:])
        elif line == "\n" and data is not None:
            yield event, data
            event, data = "message", None


def test_a_running_run_streams_its_changes(make, ui):
    RELEASE.clear()
    def policy(goal, state):
        return Intent.call("slow", n=len(state.observations) + 1) if len(state.observations) < 2 else Finish("ok")

    durable = make(AgentLoop([slow], policy, lambda o: o.tool_name == "finish"))
    durable.start("wait for the test", run_id="live-1")
    connection = http.client.HTTPConnection("127.0.0.1", ui["port"], timeout=30)
    connection.request("GET", f"/runs/live-1/events?token={TOKEN}", headers={"Host": f"127.0.0.1:{ui['port']}"})
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("content-type").startswith("text/event-stream")
    messages = sse_messages(response)
    assert next(messages) == ("message", {"status": "running"})  # without seen=, the run as it is now first
    page = page_when(ui["port"], "/runs/live-1", "under way: 4 calls so far")  # decision, call, verify, decision
    assert "slow" in page[page.index('id="under-way"'):]
    RELEASE.set()
    statuses = [data["status"] for _, data in messages]  # every change, until the stream ends with the run
    assert statuses[-1] == "finished"
    assert durable.wait("live-1", timeout=30).status == "finished"


def test_the_feed_of_a_run_the_database_does_not_have_is_a_404(ui):
    """Not a 200 with an error event: a browser's EventSource would connect again forever."""
    connection = http.client.HTTPConnection("127.0.0.1", ui["port"], timeout=30)
    connection.request("GET", f"/runs/no-such-run/events?token={TOKEN}", headers={"Host": f"127.0.0.1:{ui['port']}"})
    response = connection.getresponse()
    assert response.status == 404 and "no-such-run" in response.read().decode()


def held_run(make, run_id):
    """A run started and held in its second call of `slow` until RELEASE is set; its page once the hold shows."""
    RELEASE.clear()

    def policy(goal, state):
        return Intent.call("slow", n=len(state.observations) + 1) if len(state.observations) < 2 else Finish("ok")

    durable = make(AgentLoop([slow], policy, lambda o: o.tool_name == "finish"))
    durable.start("follow me", run_id=run_id)
    return durable


def page_when(port, path, text, tries=200):
    for _ in range(tries):
        _, page, _ = request(port, "GET", path)
        if text in page:
            return page
        time.sleep(0.05)
    raise AssertionError(f"{path} never showed {text!r}; last:\n{page[:2000]}")


def test_a_running_runs_page_shows_the_transitions_its_turn_has_fired_so_far(make, ui):
    durable = held_run(make, "live-2")
    try:
        page = page_when(ui["port"], "/runs/live-2", "5 transitions in the inspector above")  # up to the held call
        assert "under way: 4 calls so far" in page and 'class="forge-inspector' in page
        data = page[page.index('id="under-way"'):]
        assert "<td>5</td><td>2</td><td>policy</td>" in data  # the held call's decision, numbered as the inspector does
        assert "call slow {&quot;n&quot;: 2}" in data  # a decision reads as the call it chose
    finally:
        RELEASE.set()
    assert durable.wait("live-2", timeout=30).status == "finished"


def test_a_pages_feed_tells_it_of_a_change_made_before_it_listened(make, ui):
    durable = held_run(make, "live-3")
    page = page_when(ui["port"], "/runs/live-3", "4 calls so far")
    feed = page[page.index("new EventSource(") + len("new EventSource("):].split(")")[0]
    RELEASE.set()
    assert durable.wait("live-3", timeout=30).status == "finished"  # it changed before the page listened
    connection = http.client.HTTPConnection("127.0.0.1", ui["port"], timeout=30)
    connection.request("GET", json.loads(feed), headers={"Host": f"127.0.0.1:{ui['port']}"})
    assert list(sse_messages(connection.getresponse())) == [("message", {"status": "finished"})]


# --- security ------------------------------------------------------------------------------


def test_a_request_without_the_token_is_refused(ui):
    status, body, _ = request(ui["port"], "GET", "/", token=None)
    assert status == 403 and "open the URL forge ui printed" in body
    assert request(ui["port"], "GET", "/", token="wrong")[0] == 403


def test_the_token_sets_a_session_cookie_that_later_requests_use(ui):
    _, _, headers = request(ui["port"], "GET", "/")
    cookie = headers["set-cookie"].split(";")[0]
    assert "HttpOnly" in headers["set-cookie"] and "SameSite=strict" in headers["set-cookie"]
    assert request(ui["port"], "GET", "/", token=None, headers={"Cookie": cookie})[0] == 200


def test_a_wrong_host_header_is_refused_against_dns_rebinding(ui):
    status, body, _ = request(ui["port"], "GET", "/", host="evil.example:80")
    assert status == 400 and "does not serve the host" in body


def test_a_post_from_another_origin_is_refused(make, ui):
    durable = make(approval_loop())
    durable.run("pay bob", run_id="csrf-1")
    _, page, _ = request(ui["port"], "GET", "/runs/csrf-1")
    form = {"csrf": csrf_of(page), "kind": "reject", "value": durable.status("csrf-1").waiting.fingerprint}
    assert request(ui["port"], "POST", "/runs/csrf-1/answer", form=form)[0] == 403  # no Origin
    evil = {"Origin": "http://evil.example"}
    assert request(ui["port"], "POST", "/runs/csrf-1/answer", headers=evil, form=form)[0] == 403


def test_a_post_without_the_sessions_csrf_token_is_refused(make, ui):
    durable = make(approval_loop())
    durable.run("pay bob", run_id="csrf-2")
    origin = {"Origin": f"http://127.0.0.1:{ui['port']}"}
    form = {"kind": "reject", "value": durable.status("csrf-2").waiting.fingerprint}
    status, body, _ = request(ui["port"], "POST", "/runs/csrf-2/answer", headers=origin, form=form)
    assert status == 403 and "CSRF" in body
    assert durable.status("csrf-2").status == "waiting"


def test_read_only_serves_no_action_at_all(make, ui):
    durable = make(approval_loop())
    durable.run("pay bob", run_id="read-only-1")
    port = ui["read_only_port"]
    _, page, _ = request(port, "GET", "/runs/read-only-1")
    assert "<form method=\"post\"" not in page
    origin = {"Origin": f"http://127.0.0.1:{port}"}
    form = {"kind": "approve", "value": durable.status("read-only-1").waiting.fingerprint}
    assert request(port, "POST", "/runs/read-only-1/answer", headers=origin, form=form)[0] in (404, 405)
    assert durable.status("read-only-1").status == "waiting"


def test_run_data_is_escaped_everywhere(make, ui):
    make(AgentLoop([send], lambda goal, state: Finish("<img src=x onerror=alert(2)>"), lambda o: True)).run(
        "<script>alert(1)</script>", run_id="escape-1")
    for path in ("/", "/runs/escape-1"):
        _, page, _ = request(ui["port"], "GET", path)
        assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
        assert "<img src=x" not in page


def test_a_run_id_with_url_and_html_characters_links_to_its_own_page(make, ui):
    odd = 'odd?id#1 <b>"'
    held_run(make, odd)
    try:
        _, listing, _ = request(ui["port"], "GET", "/?q=odd%3Fid")
        link = listing[listing.index('href="/runs/odd'):].split('"')[1].replace("&amp;", "&")
        status, page, _ = request(ui["port"], "GET", link.split("?")[0])
        assert status == 200 and "odd?id#1 &lt;b&gt;&quot;" in page and "<b>" not in page
        assert '/runs/odd%3Fid%231%20%3Cb%3E%22/events' in page  # the live feed's URL too: no way out of its script
    finally:
        RELEASE.set()


def test_forge_ui_prints_one_url_with_its_token_and_warns_for_every_address(db):
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "forge", "ui", "--db", str(db), "--port", str(port),
                                "--host", "0.0.0.0", "--read-only"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith(f"forge ui (read-only): http://127.0.0.1:{port}/?token=")
        token = line.strip().split("token=")[1]
        assert len(token) >= 32
    finally:
        process.terminate()
        _, errors = process.communicate(timeout=30)
    assert "warning: forge ui serves 0.0.0.0" in errors


# --- in a real headless Chromium ----------------------------------------------------------

def test_in_chromium_the_list_the_inbox_and_a_runs_inspector_work_and_are_not_blank(make, ui, tmp_path):
    """Its screenshots are the README's: FORGE_UI_SHOTS=docs writes them there."""
    import os
    from pathlib import Path

    tmp_path = Path(os.environ.get("FORGE_UI_SHOTS") or tmp_path)
    from browser import console_errors, open_browser, png_summary

    need_chromium()
    make(approval_loop()).run("pay bob in the browser", run_id="browser-wait")
    finishing = make(AgentLoop([send], lambda goal, state: Finish("ok"), lambda o: True))
    for number in range(3):
        finishing.run("done in the browser", run_id=f"browser-done{'' if number == 0 else number}")
    from selenium.webdriver.common.by import By

    driver = open_browser(1280, 900)
    base = f"http://127.0.0.1:{ui['port']}"
    try:
        driver.get(f"{base}/?token={TOKEN}")
        assert driver.find_element(By.CSS_SELECTOR, 'tr[data-run="browser-done"]')
        driver.save_screenshot(str(tmp_path / "ui-runs.png"))
        driver.get(f"{base}/inbox")  # the cookie carries the session on
        assert driver.find_element(By.CSS_SELECTOR, 'div[data-run="browser-wait"]')
        driver.save_screenshot(str(tmp_path / "ui-inbox.png"))
        driver.find_element(By.CSS_SELECTOR, 'div[data-run="browser-wait"] a').click()
        page_wait(driver).until(lambda d: d.execute_script(
            "var r = document.querySelector('.forge-inspector'); return r && r.dataset.ready"))
        assert driver.find_element(By.ID, "answer").text.startswith("waiting for your answer (approval_required)")
        assert driver.find_element(By.CSS_SELECTOR, ".fi-end-label").text == "waits in"
        driver.save_screenshot(str(tmp_path / "ui-run.png"))
        driver.get(f"{base}/loops/{finishing.name}")
        assert "3 finished runs" in driver.find_element(By.TAG_NAME, "h2").text
        driver.save_screenshot(str(tmp_path / "ui-many.png"))
        assert console_errors(driver) == []
    finally:
        driver.quit()
    for name in ("ui-runs.png", "ui-inbox.png", "ui-run.png", "ui-many.png"):
        _, _, colours = png_summary((tmp_path / name).read_bytes())
        assert colours > 50, f"{name} looks blank"


# --- forks, many runs, a worker ----------------------------------------------------------------


def test_forking_from_the_page_makes_a_new_run_that_says_where_it_came_from(make, ui):
    durable = make(AgentLoop([send], lambda goal, state: Finish("ok"), lambda o: True))
    durable.run("fork me", run_id="fork-source")
    _, page, _ = request(ui["port"], "GET", "/runs/fork-source")
    assert 'id="fork"' in page
    origin = {"Origin": f"http://127.0.0.1:{ui['port']}"}
    status, _, headers = request(ui["port"], "POST", "/runs/fork-source/fork", headers=origin,
                                 form={"csrf": csrf_of(page), "at": "1", "patch": ""})
    assert status == 303 and "done=forked" in headers["location"]
    new = headers["location"].split("?")[0].rsplit("/", 1)[1]
    assert new == "fork-source-fork-1"  # a readable id, saying what it was forked from
    forked = durable.status(new)
    assert forked.forked_from.run_id == "fork-source" and forked.forked_from.transition == 1
    again = request(ui["port"], "POST", "/runs/fork-source/fork", headers=origin,
                    form={"csrf": csrf_of(page), "at": "2", "patch": ""})
    assert again[2]["location"].split("?")[0].endswith("/fork-source-fork-2")
    _, child, _ = request(ui["port"], "GET", "/runs/fork-source-fork-1")
    assert 'id="forked-from"' in child and 'href="/runs/fork-source?token=' in child
    bad = request(ui["port"], "POST", "/runs/fork-source/fork", headers=origin,
                  form={"csrf": csrf_of(page), "at": "99"})
    assert bad[0] == 400 and "not forked" in bad[1]


def test_a_loops_page_draws_its_runs_on_the_definition(make, ui):
    durable = make(AgentLoop([send], lambda goal, state: Finish("ok"), lambda o: True))
    for number in range(3):
        durable.run(f"many {number}", run_id=f"many-{number}")
    _, page, _ = request(ui["port"], "GET", f"/loops/{durable.name}")
    assert "3 finished runs" in page and "<svg" in page
    assert "3 runs · p50" in page and "0% failed" in page and "no run" in page
    table = page[page.index('<table id="edges">'):]
    assert "<tr><td>select -finish-&gt; observe [policy_finished]</td><td>3</td>" in table  # the labels, as text


def test_a_loops_page_with_no_finished_run_draws_its_definition(make, ui):
    durable = make(approval_loop())
    durable.run("pay bob", run_id="loop-waits")
    _, page, _ = request(ui["port"], "GET", f"/loops/{durable.name}")
    assert "no finished run of this loop yet: its definition" in page and "<svg" in page and "approve" in page


def test_a_loops_page_with_no_run_says_so(ui):
    _, page, _ = request(ui["port"], "GET", "/loops/never-ran")
    assert "no run of this loop yet" in page and "<svg" not in page


def test_forge_diagram_runs_draws_the_same_as_a_picture(make, db, tmp_path):
    from builders import forge

    durable = make(AgentLoop([send], lambda goal, state: Finish("ok"), lambda o: True))
    for number in range(2):
        durable.run(f"drawn {number}", run_id=f"drawn-{number}")
    out = tmp_path / "many.svg"
    done = forge("diagram", "--runs", str(db), "--loop", durable.name, "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert "2 runs" in done.stdout and "2 runs · p50" in out.read_text()


def approve_three_writes_through_the_page(db, ledger):
    """Submit a filing run on `db`, start a forge worker and the UI on it, approve each of its
    three writes on the page, and return how the run ended; on the way, follow a run the
    worker holds in a call: its page shows the transitions the worker process fired so far."""
    import os
    import signal
    from pathlib import Path

    from builders import forge

    from forge.durable.runs import StoredRuns

    submitted = forge("submit", "file every item", "--loop", "filing-approved", "--db", db, "--run-id", "w-1")
    assert submitted.returncode == 0, submitted.stderr
    env = dict(os.environ, FORGE_TEST_LEDGER=str(ledger), FORGE_TEST_DB=db)
    worker = subprocess.Popen([sys.executable, "-m", "forge", "worker", "--db", db, "--loops",
                               str(Path(__file__).with_name("durable_workers.py"))], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(db, TOKEN, hosts={f"127.0.0.1:{port}"}), host="127.0.0.1",
                                           port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        with StoredRuns(db) as runs:
            for answered in range(3):  # each write waits for its own approval, given on the page
                waiting = runs.wait("w-1", timeout=120, answers=answered)
                assert waiting.status == "waiting", waiting
                status, _, headers = post_answer(port, "w-1", {"kind": "approve",
                                                               "value": waiting.waiting.fingerprint})
                assert status == 303 and "served=1" in headers["location"]  # a worker is live: no warning
            done = runs.wait("w-1", timeout=120, answers=3)
            assert forge("submit", "hold on", "--loop", "holding", "--db", db, "--run-id", "h-1").returncode == 0
            page_when(port, "/runs/h-1", "5 transitions in the inspector above", tries=1200)
            Path(f"{ledger}.release").touch()
            assert runs.wait("h-1", timeout=120).status == "finished"
            return done
    finally:
        server.should_exit = True
        thread.join(10)
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)


@pytest.mark.slow
def test_approving_from_the_page_lets_a_forge_worker_finish_the_run(tmp_path):
    done = approve_three_writes_through_the_page(str(tmp_path / "worker.sqlite"), tmp_path / "ledger")
    assert (done.status, done.reason) == ("finished", "verified_success")
    assert sorted(calls_made(tmp_path / "ledger").values()) == [1, 1, 1]  # each approved write called once


@pytest.mark.slow
def test_the_ui_works_on_postgresql_with_a_worker(tmp_path):
    from postgres import postgres_server, why_no_postgres

    reason = why_no_postgres()
    if reason is not None:
        pytest.skip(reason)
    with postgres_server() as url:
        done = approve_three_writes_through_the_page(url, tmp_path / "ledger")
    assert (done.status, done.reason) == ("finished", "verified_success")
    assert sorted(calls_made(tmp_path / "ledger").values()) == [1, 1, 1]  # each approved write called once


def test_the_conversation_panel_of_a_chat_policy_run_shows_what_the_model_was_sent_and_said(make, ui):
    openai = pytest.importorskip("openai")
    from chat_server import ChatServer, reply

    from forge.models.chat import ChatPolicy

    with ChatServer([reply(None, ("call_9", "send", {"to": "dan", "amount": 2})) | {
                         "_usage": {"prompt_tokens": 70, "completion_tokens": 9}},
                     reply("Sent 2 to dan.") | {"_usage": {"prompt_tokens": 95, "completion_tokens": 6}}]) as server:
        policy = ChatPolicy("test-model", client=openai.OpenAI(base_url=server.url, api_key="test"),
                            system="You move money carefully.")
        make(AgentLoop([send], policy, lambda o: o.tool_name == "finish")).run("give dan 2", run_id="chat-ui")
    _, page, _ = request(ui["port"], "GET", "/runs/chat-ui")
    panel = page[page.index('id="conversation"'):]
    assert "conversation · 180 tokens" in panel
    for seen in ("You move money carefully.", "give dan 2", "→ call call_9: send", "← result of call_9: sent 2 to dan",
                 "Sent 2 to dan.", "70 prompt + 9 completion tokens", "95 prompt + 6 completion tokens"):
        assert seen in panel, seen


@pytest.mark.parametrize("width", [900, 1280])
def test_in_chromium_approving_from_a_page_shows_the_run_finished_without_a_reload(make, ui, width):
    from browser import console_errors, open_browser

    need_chromium()
    from selenium.webdriver.common.by import By

    durable = make(approval_loop())
    durable.run("pay bob", run_id=f"browser-approve-{width}")
    driver = open_browser(width, 900)
    try:
        driver.get(f"http://127.0.0.1:{ui['port']}/runs/browser-approve-{width}?token={TOKEN}")
        approve = driver.find_element(By.CSS_SELECTOR, '#answer button')
        cancel = driver.find_element(By.XPATH, '//button[text()="cancel the run"]')
        assert approve.text == "approve" and approve.value_of_css_property("color") == "rgba(255, 255, 255, 1)"
        assert approve.value_of_css_property("background-color") != cancel.value_of_css_property("background-color")
        approve.click()  # the page the answer leads to follows the run: nobody reloads it
        status = 'var s = document.getElementById("status"); return s ? s.textContent : null'
        page_wait(driver, 0.1).until(lambda d: d.execute_script(status) == "finished")
        assert "done=answered" not in driver.current_url and driver.find_elements(By.ID, "answer") == []
        assert console_errors(driver) == []
    finally:
        driver.quit()


def test_in_chromium_the_fork_form_follows_the_transition_selected_in_the_timeline(make, ui):
    from browser import console_errors, open_browser

    need_chromium()
    from selenium.webdriver.common.by import By

    durable = make(AgentLoop([send], sender, lambda o: o.tool_name == "finish"))
    durable.run("pay bob", run_id="browser-fork")
    driver = open_browser(1280, 900)
    try:
        driver.get(f"http://127.0.0.1:{ui['port']}/runs/browser-fork?token={TOKEN}")
        at = driver.find_element(By.CSS_SELECTOR, '#fork input[name="at"]')
        assert at.get_attribute("value") == "1"  # a finished run opens at its first transition
        driver.find_elements(By.CSS_SELECTOR, ".fi-row")[2].click()
        assert at.get_attribute("value") == "3" and driver.find_element(By.ID, "fork-at").text == "3"
        assert console_errors(driver) == []
    finally:
        driver.quit()


def test_in_chromium_approving_with_edited_arguments_runs_the_edited_call(make, ui):
    from browser import console_errors, open_browser

    need_chromium()
    from selenium.webdriver.common.by import By

    SENT.clear()
    durable = make(approval_loop())
    durable.run("pay bob from the browser", run_id="browser-edit")
    driver = open_browser(1280, 900)
    try:
        driver.get(f"http://127.0.0.1:{ui['port']}/runs/browser-edit?token={TOKEN}")
        editor = driver.find_element(By.CSS_SELECTOR, '#answer textarea[name="arguments"]')
        editor.clear()
        editor.send_keys('{"to": "bob", "amount": 42}')
        editor.find_element(By.XPATH, "following-sibling::button").click()  # the browser sends Origin and CSRF itself
        done = durable.wait("browser-edit", timeout=30, answers=1)
        assert (done.status, done.answer) == ("finished", "sent 42 to bob") and SENT == [{"to": "bob", "amount": 42}]
        driver.get(f"http://127.0.0.1:{ui['port']}/runs/browser-edit")
        assert driver.find_element(By.ID, "status").text == "finished"
        assert console_errors(driver) == []
    finally:
        driver.quit()


def test_in_chromium_a_running_run_is_followed_live_and_opens_where_it_is(make, ui, tmp_path):
    """Its screenshot is the README's live run: FORGE_UI_SHOTS=docs writes it there."""
    import os
    from pathlib import Path

    from browser import console_errors, open_browser, png_summary

    need_chromium()
    from selenium.webdriver.common.by import By

    shots = Path(os.environ.get("FORGE_UI_SHOTS") or tmp_path)
    durable = held_run(make, "browser-live")
    page_when(ui["port"], "/runs/browser-live", "4 calls so far")
    driver = open_browser(1280, 900)
    try:
        driver.get(f"http://127.0.0.1:{ui['port']}/runs/browser-live?token={TOKEN}")
        position = lambda d: text_of(d, ".fi-position")  # noqa: E731
        page_wait(driver).until(lambda d: position(d) == "5 / 5")  # the page reloads as transitions arrive
        assert driver.find_element(By.ID, "status").text == "running"
        driver.save_screenshot(str(shots / "ui-live.png"))
        RELEASE.set()
        page_wait(driver).until(lambda d: text_of(d, "#status") == "finished")
        page_wait(driver).until(lambda d: position(d) == "1 / 11")  # a finished run opens at its first
        assert console_errors(driver) == []
    finally:
        RELEASE.set()
        driver.quit()
    assert durable.wait("browser-live", timeout=30).status == "finished"
    _, _, colours = png_summary((shots / "ui-live.png").read_bytes())
    assert colours > 50, "ui-live.png looks blank"


def test_forge_ui_notes_the_goals_for_the_search_as_it_starts_not_at_the_first_search(make, db):
    from starlette.testclient import TestClient

    from forge.durable.runs import StoredRuns

    make(approval_loop()).run("a goal noted before anyone searches", run_id="noted-early")
    with StoredRuns(db) as runs, TestClient(create_app(str(db), TOKEN, hosts={"testserver"})):
        for _ in range(200):
            if "noted-early" in runs.database.search_runs("noted before anyone", 10, 0):
                break
            time.sleep(0.05)
        assert "noted-early" in runs.database.search_runs("noted before anyone", 10, 0)


def test_in_chromium_a_page_the_user_typed_into_says_the_run_moved_on_instead_of_reloading(make, ui):
    from browser import console_errors, open_browser

    need_chromium()
    from selenium.webdriver.common.by import By

    from forge.durable import Answer
    from forge.durable.runs import StoredRuns

    RELEASE.clear()

    def pay_then_wait(goal, state):  # waits to pay; answered, pays, then is held in slow(2)
        plan = [Intent.call("send", to="bob", amount=5), Intent.call("slow", n=2)]
        return plan[len(state.observations)] if len(state.observations) < 2 else Finish("ok")

    durable = make(AgentLoop([send, slow], pay_then_wait, lambda o: o.tool_name == "finish", definition="approval",
                             approver=lambda request: None))
    waiting = durable.run("pay, then wait", run_id="browser-typed")
    with StoredRuns(durable.db) as runs:  # answered without waiting for the run, which is then held
        runs.resume("browser-typed", Answer.approve(waiting.waiting.fingerprint))
    page_when(ui["port"], "/runs/browser-typed", "under way: ")  # answered: it pays, then is held in slow
    driver = open_browser(1280, 900)
    try:
        driver.get(f"http://127.0.0.1:{ui['port']}/runs/browser-typed?token={TOKEN}")
        patch = driver.find_element(By.CSS_SELECTOR, '#fork textarea[name="patch"]')
        patch.send_keys('{"tool_result": "half typed')
        RELEASE.set()  # the run goes on and finishes: its feed tells the page
        page_wait(driver).until(lambda d: d.find_element(By.ID, "moved").is_displayed())
        assert patch.get_attribute("value") == '{"tool_result": "half typed'  # the same page: not reloaded
        assert driver.find_element(By.ID, "status").text == "running"
        driver.find_element(By.CSS_SELECTOR, "#moved a").click()
        page_wait(driver).until(lambda d: text_of(d, "#status") == "finished")
        assert console_errors(driver) == []
    finally:
        RELEASE.set()
        driver.quit()


def test_the_search_takes_percent_and_underscore_as_text(make, ui):
    durable = make(AgentLoop([send], lambda goal, state: Finish("ok"), lambda o: True))
    durable.run("pay 50% now", run_id="percent-1")
    durable.run("pay 500 now", run_id="percent-2")
    _, page, _ = request(ui["port"], "GET", "/?" + urlencode({"q": "50%"}))
    assert 'data-run="percent-1"' in page and 'data-run="percent-2"' not in page
    _, none, _ = request(ui["port"], "GET", "/?" + urlencode({"q": "pay_5"}))
    assert 'data-run="percent-' not in none


CONTRAST = """
function rgb(text) { var m = text.match(/[\\d.]+/g).map(Number); return m.length > 3 && m[3] === 0 ? null : m.slice(0, 3); }
function lum(c) { var v = c.map(function (x) { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); });
  return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; }
function background(el) {
  for (; el; el = el.parentElement) { var c = rgb(getComputedStyle(el).backgroundColor); if (c) return c; }
  return [255, 255, 255]; }
return Array.from(document.querySelectorAll(arguments[0])).map(function (b) {
  var a = lum(rgb(getComputedStyle(b).color)), z = lum(background(b));
  return [b.textContent.trim(), (Math.max(a, z) + 0.05) / (Math.min(a, z) + 0.05)]; });
"""


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_in_chromium_the_inspectors_controls_are_readable_in_either_colour_scheme(make, ui, scheme):
    """Their text against their background at least 4.5:1 (WCAG AA): they were white on white
    on forge ui's pages, whose own buttons are white text on blue (issue 54, item 4)."""
    need_chromium()
    from browser import open_browser

    make(AgentLoop([send], lambda goal, state: Finish("ok"), lambda o: True)).run("read me", run_id=f"buttons-{scheme}")
    driver = open_browser(1280, 900)
    try:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia",
                               {"features": [{"name": "prefers-color-scheme", "value": scheme}]})
        driver.get(f"http://127.0.0.1:{ui['port']}/runs/buttons-{scheme}?token={TOKEN}")
        page_wait(driver).until(lambda d: d.execute_script(
            "var r = document.querySelector('.forge-inspector'); return r && r.dataset.ready"))
        shown = driver.execute_script(CONTRAST, ".fi-controls button, .fi-zoom button, .fi-controls select, .fi-row")
    finally:
        driver.quit()
    assert len(shown) >= 4
    assert [name for name, ratio in shown if ratio < 4.5] == []


OPENED = """
var view = document.querySelector('.fi-view'), svg = view.querySelector('svg');
var frame = view.getBoundingClientRect(), here = svg.querySelector('.fi-current').getBoundingClientRect();
var sizes = Array.from(svg.querySelectorAll('g.node text, g.edge text')).map(function (t) {
  return t.getBoundingClientRect().height; }).filter(function (h) { return h > 0; });
return {smallest: Math.min.apply(null, sizes), inView: here.left >= frame.left && here.right <= frame.right
        && here.top >= frame.top && here.bottom <= frame.bottom};
"""


@pytest.mark.parametrize("run_id", ["opened-waiting", "opened-finished"])
def test_in_chromium_a_runs_diagram_opens_readable_with_where_the_run_is_in_view(make, ui, run_id):
    """At 1280 px, every label of the diagram at least 10 px tall when the page opens (a wide
    machine fitted to its box had 5 px text), and the state the run is in shown, not cut off
    (issue 54, item 4)."""
    need_chromium()
    from browser import open_browser

    if run_id == "opened-waiting":
        make(approval_loop()).run("pay bob", run_id=run_id)
    else:
        make(AgentLoop([send], lambda goal, state: Finish("ok"), lambda o: True)).run("done", run_id=run_id)
    driver = open_browser(1280, 900)
    try:
        driver.get(f"http://127.0.0.1:{ui['port']}/runs/{run_id}?token={TOKEN}")
        page_wait(driver).until(lambda d: d.execute_script(
            "var r = document.querySelector('.forge-inspector'); return r && r.dataset.ready"))
        opened = driver.execute_script(OPENED)
    finally:
        driver.quit()
    assert opened["smallest"] >= 10 and opened["inView"], opened


LOOP_PAGE = """
var box = document.getElementById('many-runs'), svg = box.querySelector('svg');
var sizes = Array.from(svg.querySelectorAll('g.node text, g.edge text')).map(function (t) {
  return t.getBoundingClientRect().height; }).filter(function (h) { return h > 0; });
var overflow = getComputedStyle(box).overflowX;
return {smallest: Math.min.apply(null, sizes), labels: sizes.length,
        fits: svg.getBoundingClientRect().right <= box.getBoundingClientRect().right + 1,
        scrolls: overflow === 'auto' || overflow === 'scroll'};
"""


def test_in_chromium_a_loops_diagram_is_readable_and_whole_at_1280_px(make, ui):
    """The loop page's diagram: every label at least 10 px tall, and all of it in its box or
    reachable by scrolling the box, never cut off (issue 54, item 4)."""
    need_chromium()
    from urllib.parse import quote

    from browser import open_browser

    durable = make(AgentLoop([send], lambda goal, state: Finish("ok"), lambda o: True))
    durable.run("done", run_id="loop-page-1")
    driver = open_browser(1280, 900)
    try:
        driver.get(f"http://127.0.0.1:{ui['port']}/loops/{quote(durable.name, safe='')}?token={TOKEN}")
        page_wait(driver).until(lambda d: d.execute_script("return !!document.querySelector('#many-runs svg')"))
        shown = driver.execute_script(LOOP_PAGE)
    finally:
        driver.quit()
    assert shown["labels"] > 5 and shown["smallest"] >= 10 and (shown["fits"] or shown["scrolls"]), shown
