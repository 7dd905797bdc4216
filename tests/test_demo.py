import io
import os

import pytest

from forge import PermanentToolError, TransientToolError, read_trace
from forge.demo import prepare_workspace, run_demo
from forge.demo.scenarios import SCENARIOS, build_scenario
from forge.demo.service import AnalysisService
from forge.demo.tools import analyse_tool, parse_retry_after
from forge.demo.workspace import NOTES, Workspace


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return {name: run_demo(tmp_path_factory.mktemp(name), name, out=io.StringIO()) for name in SCENARIOS}


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_each_scenario_ends_in_its_expected_state(reports, name):
    assert reports[name].result.reason == SCENARIOS[name].expected


def test_default_run_has_retryable_errors_before_success(reports):
    statuses = [o.status for o in reports["index"].result.state.observations]
    assert "retryable_error" in statuses
    assert statuses.index("retryable_error") < len(statuses) - 1
    assert statuses[-1] == "ok"


def test_default_run_refuses_the_hint_argument_and_retries_the_flaky_service(reports):
    result = reports["index"].result
    refused = [o for o in result.state.observations if o.status == "retryable_error"]
    assert "unexpected: lang" in str(refused[0].payload)
    assert result.retries == 2


def test_default_run_writes_the_index_once_and_it_verifies(reports):
    report = reports["index"]
    writes = [o for o in report.result.state.observations if o.tool_name == "write_file"]
    assert len(writes) == 1
    assert report.result.side_effects_run == 1
    index = (report.workspace / "INDEX.md").read_text()
    assert "| notes/forge.md | Forge design | 16 |" in index


def test_default_run_leaves_trace_and_overlay_diagram(reports):
    report = reports["index"]
    assert read_trace(report.trace_path) == report.result.trace
    assert report.diagram_path.suffix == ".svg"
    assert "ended in verified_success" in report.diagram_path.read_text()


def test_forbidden_scenario_fails_on_a_permission_denial(reports):
    result = reports["forbidden"].result
    assert isinstance(result.error, PermanentToolError)
    assert "outside the workspace" in str(result.error)
    assert not (reports["forbidden"].workspace.parent / "INDEX.md").exists()


def test_unreachable_scenario_exhausts_retries_then_replans_until_repetition(reports):
    result = reports["unreachable"].result
    failed = [o for o in result.state.observations if o.tool_name == "analyse"]
    assert all(o.status == "retryable_error" for o in failed)
    assert isinstance(failed[-1].payload, TransientToolError)
    assert result.retries == 2 * (len(failed) - 1)


def test_demo_prints_one_line_per_transition_and_a_summary(tmp_path):
    out = io.StringIO()
    report = run_demo(tmp_path / "ws", "gap", out=out)
    lines = out.getvalue().splitlines()
    transitions = [line for line in lines if " step " in line and "─" in line]
    assert len(transitions) == len(report.result.trace)
    assert any(line.startswith("stopped: capability_gap") for line in lines)
    assert any(line.startswith("trace: ") for line in lines)


def test_demo_refuses_a_non_empty_foreign_workspace(tmp_path):
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(ValueError, match="not made by forge demo"):
        prepare_workspace(tmp_path)
    assert (tmp_path / "precious.txt").read_text() == "keep me"


def test_demo_reuses_its_own_workspace(tmp_path):
    first = prepare_workspace(tmp_path / "ws")
    (first / "INDEX.md").write_text("old")
    assert prepare_workspace(first) == first
    assert not (first / "INDEX.md").exists()


def test_unknown_scenario_lists_the_scenarios(tmp_path):
    with pytest.raises(ValueError, match="index, ambiguous"):
        run_demo(tmp_path, "nope", out=io.StringIO())


@pytest.fixture
def workspace(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    ws = Workspace(root)
    ws.seed()
    (tmp_path / "secret.txt").write_text("outside")
    return ws


@pytest.mark.parametrize("path", ["../secret.txt", "notes/../../secret.txt", "notes/../.."])
def test_dot_dot_escapes_are_refused(workspace, path):
    with pytest.raises(PermanentToolError, match="outside the workspace"):
        workspace.read(path)


def test_absolute_paths_are_refused(workspace, tmp_path):
    with pytest.raises(PermanentToolError, match="absolute"):
        workspace.read(str(tmp_path / "secret.txt"))


def test_symlink_pointing_out_is_refused_not_followed(workspace, tmp_path):
    os.symlink(tmp_path / "secret.txt", workspace.root / "notes" / "link.md")
    with pytest.raises(PermanentToolError, match="outside the workspace"):
        workspace.read("notes/link.md")
    with pytest.raises(PermanentToolError, match="outside the workspace"):
        workspace.write("notes/link.md", "overwrite")
    assert (tmp_path / "secret.txt").read_text() == "outside"
    assert "notes/link.md" not in workspace.list_notes("notes")


def test_symlinked_folder_pointing_out_is_refused(workspace, tmp_path):
    os.symlink(tmp_path, workspace.root / "escape")
    with pytest.raises(PermanentToolError, match="outside the workspace"):
        workspace.write("escape/new.txt", "x")
    assert not (tmp_path / "new.txt").exists()


def test_nul_byte_is_refused(workspace):
    with pytest.raises(PermanentToolError, match="NUL"):
        workspace.read("notes/forge.md\x00.txt")


def test_paths_inside_the_workspace_work(workspace):
    assert workspace.read("notes/../notes/forge.md") == NOTES["notes/forge.md"]
    assert workspace.list_notes("notes") == sorted(NOTES)


def test_service_answers_503_with_retry_after_then_recovers():
    with AnalysisService(failures=1) as service:
        tool = analyse_tool(service.url)
        with pytest.raises(TransientToolError) as caught:
            tool.handler(path="a", text="# T\nx y")
        assert caught.value.retry_after == 1.0
        assert tool.handler(path="a", text="# T\nx y") == {"path": "a", "title": "T", "words": 4}


def test_stopped_service_is_transient_unreachable():
    service = AnalysisService(failures=0).start()
    url = service.url
    service.stop()
    with pytest.raises(TransientToolError, match="unreachable"):
        analyse_tool(url, timeout=0.5).handler(path="a", text="x")


@pytest.mark.parametrize("value, seconds", [("3", 3.0), (None, None), ("soon", None)])
def test_retry_after_header_is_parsed(value, seconds):
    assert parse_retry_after(value) == seconds


def test_retry_after_http_date_is_seconds_from_now():
    assert parse_retry_after("Thu, 01 Jan 2026 00:00:10 GMT", now=1767225600.0) == 10.0


def test_scenario_builder_starts_and_closes_its_service(tmp_path):
    scenario = build_scenario("index", tmp_path)
    url = scenario.service.url
    scenario.close()
    with pytest.raises(TransientToolError):
        analyse_tool(url, timeout=0.5).handler(path="a", text="x")


def test_demo_without_graphviz_writes_dot_and_says_so(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    out = io.StringIO()
    report = run_demo(tmp_path / "ws", "gap", out=out)
    assert report.diagram_path.suffix == ".dot"
    assert "Graphviz's dot is not installed" in out.getvalue()
