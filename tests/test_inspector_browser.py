"""The run inspector in a real headless Chromium (Debian's chromium + chromium-driver, driven
by selenium). Without them these tests skip, and the reason is printed."""

import io

import pytest
from browser import console_errors, load, open_browser, png_summary, screenshot_inspector, why_no_browser
from builders import intent, scripted_loop, tool

from forge.demo import run_demo
from forge.inspect import write
from forge.options import Limits

REASON = why_no_browser()
if REASON is not None:
    print(f"\ninspector browser tests skipped: {REASON}")
pytestmark = pytest.mark.skipif(REASON is not None, reason=REASON or "")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    report = run_demo(tmp_path_factory.mktemp("demo") / "workspace", out=io.StringIO())
    assert report.result.reason == "verified_success" and report.inspector_path is not None
    return report


@pytest.fixture(scope="module")
def driver():
    browser = open_browser()
    yield browser
    browser.quit()


@pytest.fixture
def page(driver, demo):
    load(driver, demo.inspector_path)
    console_errors(driver)  # start each test with an empty console
    return driver


def press(driver, key, times=1):
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(driver).send_keys(*([key] * times)).perform()


def highlighted_state(driver):
    return driver.execute_script(
        "var g = document.querySelectorAll('.forge-inspector svg g.node.fi-current');"
        "return g.length === 1 ? g[0].querySelector('title').textContent : g.length + ' highlighted';")


def panel_guards(driver):
    return driver.execute_script(
        "return Array.from(document.querySelectorAll('.fi-panel .fi-guards tr')).map(function (tr) {"
        "  return [tr.dataset.guard, tr.querySelector('.fi-guard-value').textContent === 'true']; });")


def visible_rows(driver):
    return driver.execute_script("return Array.from(document.querySelectorAll('.fi-row')).map(r => r.textContent);")


def test_five_presses_of_the_right_arrow_highlight_the_sixth_records_state_and_show_its_guards(page, demo):
    from selenium.webdriver.common.keys import Keys

    press(page, Keys.ARROW_RIGHT, 5)
    record = demo.result.trace[5]
    assert highlighted_state(page) == record.dest
    assert panel_guards(page) == [[g.name, g.value] for g in record.guards]
    assert page.find_element("css selector", ".fi-panel h2").text.startswith(f"#{record.sequence} ")


def test_each_press_moves_one_transition_and_the_panel_shows_its_guards(page, demo):
    from selenium.webdriver.common.keys import Keys

    for index in range(1, 12):
        press(page, Keys.ARROW_RIGHT)
        record = demo.result.trace[index]
        assert highlighted_state(page) == record.dest, index
        assert panel_guards(page) == [[g.name, g.value] for g in record.guards], index
    press(page, Keys.ARROW_LEFT, 3)
    assert highlighted_state(page) == demo.result.trace[8].dest


def test_the_edge_the_record_took_is_highlighted(page, demo):
    from selenium.webdriver.common.keys import Keys

    press(page, Keys.ARROW_RIGHT, 2)
    edge = page.execute_script("var e = document.querySelector('.forge-inspector svg g.edge.fi-current-edge');"
                               "return e && e.querySelector('title').textContent;")
    record = demo.result.trace[2]
    assert edge is not None and edge.replace("&#45;", "-") == f"{record.source}->{record.dest}"


def test_the_panel_shows_the_arguments_and_the_payload(page, demo):
    from selenium.webdriver.common.keys import Keys

    assert '{"folder": "notes"}' in page.find_element("css selector", ".fi-panel .fi-field-arguments").text
    press(page, Keys.ARROW_RIGHT, 2)
    assert "notes/forge.md" in page.find_element("css selector", ".fi-panel .fi-field-payload").text


def test_filtering_by_a_tool_lists_only_the_steps_that_used_it(page, demo):
    from selenium.webdriver.support.ui import Select

    Select(page.find_element("css selector", ".fi-tool")).select_by_value("read_note")
    steps = {r.step for r in demo.result.trace if r.detail.get("tool") == "read_note"}
    expected = [r for r in demo.result.trace if r.step in steps]
    rows = visible_rows(page)
    assert len(rows) == len(expected) and len(steps) == 3
    assert [row.split()[0] for row in rows] == [f"#{r.sequence}" for r in expected]
    assert page.find_element("css selector", ".fi-count").text == f"{len(expected)} of {len(demo.result.trace)} transitions"


def test_filtering_by_status_keeps_the_steps_whose_call_failed(page, demo):
    from selenium.webdriver.support.ui import Select

    Select(page.find_element("css selector", ".fi-status")).select_by_value("retryable_error")
    failed = {r.step for r in demo.result.trace if r.detail.get("status") == "retryable_error"}
    assert failed and {int(row.split()[2]) for row in visible_rows(page)} == failed


def test_with_a_filter_the_arrows_move_between_matching_transitions(page, demo):
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    Select(page.find_element("css selector", ".fi-tool")).select_by_value("write_file")
    page.find_element("css selector", ".fi-list").click()
    press(page, Keys.ARROW_RIGHT)
    current = int(page.execute_script("return document.querySelector('.forge-inspector').dataset.current"))
    assert demo.result.trace[current - 1].step in {r.step for r in demo.result.trace if r.detail.get("tool") == "write_file"}


def test_play_advances_and_pause_stops(page):
    import time

    page.find_element("css selector", ".fi-play").click()
    time.sleep(1.2)
    page.find_element("css selector", ".fi-play").click()
    stopped_at = page.execute_script("return document.querySelector('.forge-inspector').dataset.current")
    assert int(stopped_at) > 1
    time.sleep(0.8)
    assert page.execute_script("return document.querySelector('.forge-inspector').dataset.current") == stopped_at


def test_the_end_state_and_reason_are_the_banner(page, demo):
    banner = page.find_element("css selector", ".fi-banner")
    assert "verified_success" in banner.find_element("css selector", ".fi-end-state").text
    assert "fi-success" in banner.get_attribute("class")
    assert demo.result.summary in banner.text


def test_the_page_logs_no_console_errors(driver, demo):
    from selenium.webdriver.common.keys import Keys

    load(driver, demo.inspector_path)
    press(driver, Keys.ARROW_RIGHT, 40)
    press(driver, Keys.END)
    press(driver, Keys.HOME)
    assert console_errors(driver) == []


def test_a_screenshot_of_the_demo_page_is_not_blank(demo, tmp_path):
    png = screenshot_inspector(demo.inspector_path, tmp_path / "inspector.png")
    width, height, colours = png_summary(png.read_bytes())
    assert (width, height) == (1280, 1100)
    assert colours > 50, f"only {colours} distinct byte values: the page looks blank"


def test_a_ten_thousand_transition_page_opens_and_draws_only_the_visible_rows(driver, tmp_path):
    from selenium.webdriver.common.keys import Keys

    loop = scripted_loop([tool(f"t{i}", required={"n"}) for i in range(3)],
                         [intent(f"t{i % 3}", n=i) for i in range(2500)], max_steps=2500, limits=Limits(repeat_limit=2500))
    result = loop.run("goal")
    page = write(result, tmp_path / "big.html")
    load(driver, page)
    assert len(visible_rows(driver)) < 60
    press(driver, Keys.END)
    assert driver.execute_script("return document.querySelector('.forge-inspector').dataset.current") == "10000"
    assert highlighted_state(driver) == result.trace[-1].dest
    assert len(visible_rows(driver)) < 60
    assert console_errors(driver) == []


def test_item_15_a_trace_with_nan_infinity_and_odd_tries_opens_and_shows_every_record(driver, tmp_path):
    """Issue 24 item 15: NaN and Infinity in a detail, and a `tries` list holding null."""
    from selenium.webdriver.common.keys import Keys

    from forge import read_trace

    lines = [
        '{"v": 2, "run_id": "r", "machine": "single_agent", "sequence": 1, "step": 1, "source": "select", '
        '"trigger": "choose", "dest": "execute", "verdict": "selected", "guards": [{"name": "tool_selected", '
        '"value": true}], "duration_s": NaN, "detail": {"tool": "t", "score": Infinity, "low": -Infinity}}',
        '{"v": 2, "run_id": "r", "machine": "single_agent", "sequence": 2, "step": 1, "source": "execute", '
        '"trigger": "call", "dest": "observe", "verdict": "ok", "guards": [], "duration_s": 0.1, '
        '"detail": {"tool": "t", "status": "ok", "attempts": 2, "tries": [null, {"attempt": 2, "delay_s": 0, '
        '"error": null}], "ratio": NaN}}',
    ]
    trace = tmp_path / "odd.jsonl"
    trace.write_text("\n".join(lines) + "\n")
    page = write(read_trace(trace), tmp_path / "odd.html")
    load(driver, page)
    press(driver, Keys.ARROW_RIGHT, 2)
    assert console_errors(driver) == []
    assert len(visible_rows(driver)) == 2
    panel = driver.execute_script("return document.querySelector('.fi-panel').textContent")
    assert "null" in panel and "returned" in panel


def test_a_run_that_failed_opens_at_the_transition_that_ended_it_not_drawn_in_failure_red(driver, tmp_path):
    from forge import AgentLoop, Intent, tool
    from forge.inspect import write

    @tool
    def look(x: str) -> str:
        """Look."""
        return x

    result = AgentLoop([look], lambda goal, state: Intent.call("look", x="same"), lambda o: False).run("look")
    load(driver, write(result, tmp_path / "failed.html"))
    assert highlighted_state(driver) == "repeated_action"
    assert driver.find_element("css selector", ".fi-panel h2").text.startswith(f"#{len(result.trace)} ")
    colour = driver.execute_script(
        "return getComputedStyle(document.querySelector('.forge-inspector svg g.node.fi-current path, "
        ".forge-inspector svg g.node.fi-current polygon')).stroke")
    assert colour == "rgb(111, 66, 193)"  # the position's violet, not the red that means failure
    assert "look {\"x\": \"same\"} was called 3 times" in driver.find_element("css selector", ".fi-banner").text


def test_the_diagram_zooms_in_pans_and_fits_back(page):
    width = page.execute_script("return document.querySelector('.fi-view svg').getBoundingClientRect().width")
    box = page.execute_script("return document.querySelector('.fi-view').clientWidth")
    page.find_element("css selector", ".fi-zoom-in").click()
    page.find_element("css selector", ".fi-zoom-in").click()
    zoomed = page.execute_script("return document.querySelector('.fi-view svg').getBoundingClientRect().width")
    assert zoomed > box * 2 and zoomed > width
    page.execute_script("document.querySelector('.fi-view').scrollLeft = 200")
    assert page.execute_script("return document.querySelector('.fi-view').scrollLeft") > 0  # it pans
    page.find_element("css selector", ".fi-zoom-fit").click()
    fitted = page.execute_script("return document.querySelector('.fi-view svg').getBoundingClientRect().width")
    assert fitted <= box + 1 and fitted < width  # all of it, in its box


def state_name_heights(driver):
    return driver.execute_script(
        "return [].map.call(document.querySelectorAll(\".fi-view g.node[id^='state-'] text\"), "
        "function (t) { return t.getBoundingClientRect().height; })")


@pytest.mark.parametrize("width", [900, 1280])
def test_the_diagram_opens_with_readable_state_names_and_the_current_state_in_view(demo, width):
    from selenium.webdriver.common.keys import Keys

    driver = open_browser(width, 900)
    try:
        load(driver, demo.inspector_path)
        assert max(state_name_heights(driver)) >= 12  # the 12 pt names; Graphviz's 8.3-inch cap fitted would be 5 px
        count = len(demo.result.trace)
        for number in range(1, count + 1):  # wherever the run is stepped to, its state is in view
            inside = driver.execute_script(
                "var v = document.querySelector('.fi-view').getBoundingClientRect(), "
                "s = document.querySelector('.fi-view g.node.fi-current').getBoundingClientRect(); "
                "return s.left >= v.left && s.right <= v.right && s.top >= v.top && s.bottom <= v.bottom")
            assert inside, f"at transition {number}, the current state is out of the diagram's view"
            press(driver, Keys.ARROW_RIGHT)
        assert console_errors(driver) == []
    finally:
        driver.quit()


def test_a_childs_inspector_opens_from_the_transition_that_called_it(driver, tmp_path):
    from forge.user_code import import_file

    example = import_file(__import__("pathlib").Path(__file__).parents[1] / "examples" / "writer.py")
    result = example.writer.run("a short article on how marine mammals sleep", run_id="article")
    load(driver, write(result, tmp_path / "writer.html"))
    console_errors(driver)
    called = result.children[1].transition
    rows = [row for row in visible_rows(driver) if row.startswith(f"#{called} ")]
    assert rows and rows[0].endswith("⤷ child run research.2")
    driver.execute_script(f"document.querySelector('.fi-row[data-sequence=\"{called}\"]').click();")
    links = driver.find_elements("css selector", ".forge-inspector > .fi-main .fi-child-link")
    assert [link.get_attribute("data-path") for link in links] == ["article/research.2"]
    links[0].click()
    opened = driver.execute_script(
        "return Array.from(document.querySelectorAll('details.fi-child')).filter(d => d.open).map(d => d.dataset.path);")
    assert opened == ["article/research.2"]
    child_meta = driver.execute_script(
        "return document.querySelector('details.fi-child[open] .forge-inspector .fi-meta').textContent;")
    assert "run article/research.2" in child_meta
    assert console_errors(driver) == []
