"""The run inspector page, read as HTML (the browser tests drive it in Chromium)."""

import json
import re
import subprocess
import sys
from html import unescape

import pytest
from builders import Recorder, intent, scripted_loop, tool

import forge.inspect.page as page
from forge import Limits, read_trace, write_trace
from forge.errors import UsageError
from forge.inspect import html, page_data
from forge.machine.loader import load_definition


def demo_like_run():
    loop = scripted_loop([tool("a", handler=Recorder({"rows": [1, 2]})), tool("b")], [intent("a"), intent("b")],
                         verify=lambda o: o.tool_name == "b")
    return loop.run("goal")


def embedded_data(text):
    found = re.search(r'<script type="application/json" id="[^"]+">(.*?)</script>', text, re.S)
    assert found is not None
    return json.loads(found.group(1))


def test_the_page_is_one_document_that_fetches_nothing():
    text = html(demo_like_run())
    assert text.startswith("<!doctype html>") and "<svg" in text and "forgeInspector(" in text
    assert not re.search(r"<script[^>]+src=|<link\b|@import|url\(\s*['\"]?https?:", text)
    assert not re.search(r"""(?:src|href)=["']https?:""", text)


def test_the_data_names_every_transition_with_its_guards_and_detail():
    result = demo_like_run()
    data = embedded_data(html(result))
    assert len(data["records"]) == len(result.trace)
    for row, record in zip(data["records"], result.trace, strict=True):
        source, trigger, dest, _ = data["edges"][row[0]]
        assert (source, trigger, dest) == (record.source, record.trigger, record.dest)
        assert data["guards"][row[3]] == [[g.name, g.value] for g in record.guards]
        assert data["details"][row[4]] == json.loads(json.dumps(dict(record.detail)))


def test_every_record_points_at_an_element_of_the_diagram():
    text = unescape(html(demo_like_run()))  # Graphviz writes the ids' hyphens as &#45;
    for element in {edge[3] for edge in embedded_data(text)["edges"]}:
        assert f'id="{element}"' in text
    assert 'id="state-verified_success"' in text


def test_the_end_state_and_why_are_in_the_banner_data():
    result = demo_like_run()
    end = embedded_data(html(result))["end"]
    assert end == {"state": "verified_success", "finished": True, "outcome": "success", "summary": result.summary}


def test_a_payload_cannot_end_the_script_that_carries_it():
    hostile = "</script><script>alert(1)</script>"
    loop = scripted_loop([tool("a", handler=Recorder(hostile))], [intent("a")], verify=lambda o: True)
    text = html(loop.run("goal"))
    assert hostile not in text
    assert hostile in json.dumps(embedded_data(text), ensure_ascii=False)


def test_a_recorded_trace_is_inspected_on_the_machine_it_names(tmp_path):
    records = read_trace(write_trace(demo_like_run().trace, tmp_path / "run.jsonl"))
    data = embedded_data(html(records))
    assert data["machine"] and data["end"]["summary"] == "ended in verified_success (success)"


def test_a_trace_that_names_no_machine_asks_for_the_definition():
    records = [r.__class__(**{**{f: getattr(r, f) for f in r.__dataclass_fields__}, "machine": ""})
               for r in demo_like_run().trace]
    with pytest.raises(UsageError, match="--machine PATH"):
        html(records)
    assert "<svg" in html(records, "single_agent")


def test_an_empty_run_is_refused():
    with pytest.raises(UsageError, match="no transitions"):
        html([])


def test_jupyter_shows_a_result_as_an_inspector_fragment():
    fragment = demo_like_run()._repr_html_()
    assert fragment is not None and fragment.startswith('<div class="forge-inspector"')
    assert "<html" not in fragment and "forgeInspector(" in fragment


def test_two_inspectors_on_one_page_have_their_own_ids():
    result = demo_like_run()
    first, second = html(result, fragment=True), html(result, fragment=True)
    assert re.search(r'id="(fi-\w+)"', first).group(1) != re.search(r'id="(fi-\w+)"', second).group(1)


def test_without_graphviz_the_page_says_why_and_keeps_the_rest(monkeypatch):
    def missing(dot, fmt):
        raise page.GraphvizNotInstalled(fmt)

    monkeypatch.setattr(page, "image_of", missing)
    text = html(demo_like_run())
    assert "No diagram:" in text and "<svg" not in text and embedded_data(text)["records"]


def test_ten_thousand_transitions_make_a_page_under_five_megabytes_even_with_long_texts():
    def echo(n, text):
        return f"{n} {text}"

    loop = scripted_loop([tool(f"t{i}", handler=echo, required={"n", "text"}) for i in range(3)],
                         [intent(f"t{i % 3}", n=i, text=f"{i}" + "x" * 5000) for i in range(2500)],
                         max_steps=2500, limits=Limits(repeat_limit=2500))
    result = loop.run("goal")
    assert len(result.trace) == 10_000
    size = len(html(result).encode("utf-8"))
    assert size <= 5_000_000, f"{size:,} bytes"


def test_page_data_shares_each_distinct_detail_once():
    result = demo_like_run()
    data = page_data(load_definition("single_agent"), list(result.trace))
    assert len(data["details"]) == len({json.dumps(dict(r.detail), sort_keys=True) for r in result.trace})


def test_forge_inspect_writes_the_page(tmp_path):
    trace = write_trace(demo_like_run().trace, tmp_path / "run.jsonl")
    out = subprocess.run([sys.executable, "-m", "forge", "inspect", str(trace), "-o", str(tmp_path / "run.html")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "wrote" in out.stdout and (tmp_path / "run.html").read_text().startswith("<!doctype html>")


def test_forge_inspect_of_a_file_that_is_not_a_trace_says_which_line(tmp_path):
    bad = tmp_path / "notes.jsonl"
    bad.write_text("hello\n")
    out = subprocess.run([sys.executable, "-m", "forge", "inspect", str(bad), "-o", str(tmp_path / "x.html")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "notes.jsonl:1:" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "x.html").exists()


def test_a_repeated_action_banner_says_which_call_repeated_and_how_often():
    from forge import AgentLoop, Intent, tool
    from forge.inspect.page import page_data

    @tool
    def look(x: str) -> str:
        """Look."""
        return x

    result = AgentLoop([look], lambda goal, state: Intent.call("look", x="same"), lambda o: False).run("look")
    summary = page_data(result.definition, list(result.trace))["end"]["summary"]
    assert summary == 'ended in repeated_action (failure): look {"x": "same"} was called 3 times'
