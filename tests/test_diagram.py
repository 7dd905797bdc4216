import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from builders import Recorder, intent, scripted_loop, tool

from forge import Limits, Retry, TransientToolError, load_definition, write_trace
from forge.diagram import (
    GraphvizNotInstalled,
    TraceMismatch,
    diagram,
    format_for,
    mermaid,
    overlay_of,
    refresh_gallery,
    render,
    stale_diagrams,
)
from forge.diagram.dot import LEGEND_NODE, START_NODE

ROOT = Path(__file__).resolve().parents[1]
DOT_NODE = re.compile(r"^\t(\w+) \[", re.M)
DOT_EDGE = re.compile(r"^\t(\w+) -> (\w+) \[label=(?:\"([^\"]*)\"|(\w+))", re.M)
MERMAID_EDGE = re.compile(r"^    (\S+) --> (\S+?)(?:: (.*))?$", re.M)


def shown_guard(guard, dest):
    """Diagrams leave out a guard that only repeats the state it leads to."""
    return None if guard is None or guard.endswith(dest) else guard


def _in_order(edges):
    return sorted(edges, key=lambda edge: tuple(part or "" for part in edge))


def definition_edges(definition):
    return _in_order((t.source, t.dest, t.trigger, shown_guard(t.guard, t.dest)) for t in definition.transitions)


def parse_label(label):
    head, _, guard = label.partition("\\n")
    return head.split(" ×")[0], guard.strip("[]") or None


def known_run(tmp_path=None):
    flaky = Recorder(*[TransientToolError("503")] * 2)
    loop = scripted_loop([tool("fetch", handler=flaky), tool("read")], [intent("fetch"), intent("read")],
                         verify=lambda o: o.tool_name == "read", retry=Retry(max_attempts=2))
    return loop.run("goal")


def test_dot_nodes_are_exactly_the_states_plus_the_start_marker_and_the_legend():
    definition = load_definition()
    nodes = [n for n in DOT_NODE.findall(diagram(definition).source) if n not in ("graph", "node", "edge")]
    assert sorted(nodes) == sorted([s.name for s in definition.states] + [START_NODE, LEGEND_NODE])


def test_dot_edges_are_exactly_the_transitions_plus_the_start_edge():
    definition = load_definition()
    source = diagram(definition).source
    edges = _in_order((a, b, *parse_label(quoted or bare)) for a, b, quoted, bare in DOT_EDGE.findall(source))
    assert edges == definition_edges(definition)
    assert f"\t{START_NODE} -> {definition.initial}\n" in source


def test_mermaid_edges_are_exactly_the_transitions_plus_the_initial_marker():
    definition = load_definition()
    edges = MERMAID_EDGE.findall(mermaid(definition))
    assert ("[*]", definition.initial, "") in edges
    parsed = []
    for a, b, label in edges:
        if a == "[*]":
            continue
        trigger, _, guard = label.partition(" [")
        parsed.append((a, b, trigger, guard.rstrip("]") or None))
    assert _in_order(parsed) == definition_edges(definition)


def test_mermaid_names_every_state_in_exactly_one_class():
    definition = load_definition()
    classed = [name for line in mermaid(definition).splitlines() if line.startswith("    class ")
               for name in line.split()[1].split(",")]
    assert sorted(classed) == sorted(s.name for s in definition.states)


def test_terminal_states_are_coloured_by_outcome():
    source = diagram().source
    assert re.search(r"verified_success \[.*color=\"#2e7d32\"", source)
    assert re.search(r"fatal_error \[.*color=\"#c62828\"", source)
    assert re.search(r"capability_gap \[.*color=\"#b26a00\"", source)


def test_every_transition_in_a_recorded_trace_is_an_edge_of_the_diagram():
    edges = {(a, b, *parse_label(q or bare)) for a, b, q, bare in DOT_EDGE.findall(diagram().source)}
    for record in known_run().trace:
        guard = next((g.name for g in record.guards if g.value), None)
        assert (record.source, record.dest, record.trigger, shown_guard(guard, record.dest)) in edges


def test_overlay_counts_a_known_run():
    result = known_run()
    overlay = overlay_of(load_definition(), result)
    definition = load_definition()
    by_edge = {(t.source, t.dest, t.guard): overlay.edge_counts.get(t.index, 0) for t in definition.transitions}
    assert by_edge[("select", "execute", "tool_selected")] == 2
    assert by_edge[("verify", "select", "decided_continue")] == 1
    assert by_edge[("verify", "verified_success", "decided_verified_success")] == 1
    assert by_edge[("verify", "fatal_error", "decided_fatal_error")] == 0
    assert overlay.position == "verified_success" and overlay.finished
    assert overlay.visited == {"select", "execute", "observe", "verify", "verified_success"}


def test_overlay_labels_taken_edges_and_fades_the_rest():
    source = diagram(trace=known_run()).source
    assert "choose ×2\\n[tool_selected]" in source
    assert re.search(r"capability_gap \[.*fontcolor=\"#9e9e9e\"", source)
    assert "run ended here" in source
    assert "ended in verified_success" in source


def test_an_overlay_of_a_run_that_waits_says_it_waits_there_not_that_it_ended():
    from forge import Ask

    waiting = scripted_loop([tool("read")], [Ask("which file?")]).run("goal")
    assert waiting.reason == "input_required"
    source = diagram(trace=waiting).source
    assert "run waits here" in source and "waits in input_required" in source
    assert "run ended here" not in source


def test_overlay_of_a_trace_from_another_machine_is_refused():
    record = known_run().trace[0]
    other = type(record)(1, 1, "select", "teleport", "verify", machine="single_agent")
    with pytest.raises(TraceMismatch, match="not a transition"):
        overlay_of(load_definition(), [other])


def test_overlay_works_for_a_ten_thousand_step_run():
    loop = scripted_loop([tool(f"t{i}") for i in range(4)], [intent(f"t{i % 4}") for i in range(10_000)],
                         max_steps=10_000, limits=Limits(repeat_limit=10**6))
    result = loop.run("long")
    overlay = overlay_of(load_definition(), result)
    assert overlay.transitions == 40_000
    assert "replan ×9999" in diagram(trace=result).source


@pytest.mark.parametrize("path, fmt", [("a.svg", "svg"), ("a.PNG", "png"), ("a.pdf", "pdf"), ("a.dot", "dot"),
                                       ("a.mmd", "mermaid"), (None, "dot")])
def test_format_follows_the_suffix(path, fmt):
    assert format_for(path, None) == fmt


def test_unknown_suffix_without_format_is_refused():
    with pytest.raises(ValueError, match="cannot tell the format"):
        format_for("diagram.txt", None)


def test_render_writes_svg(tmp_path):
    path = render("single_agent", tmp_path / "loop.svg")
    assert path.read_text().lstrip().startswith("<?xml")


def test_missing_dot_fails_images_with_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GraphvizNotInstalled, match="install Graphviz|Install Graphviz"):
        render("single_agent", tmp_path / "loop.svg")
    assert not (tmp_path / "loop.svg").exists()


def test_missing_dot_still_writes_dot_and_mermaid(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert render("single_agent", tmp_path / "loop.dot").read_text().startswith("digraph")
    assert "stateDiagram-v2" in render("single_agent", tmp_path / "loop.mmd").read_text()


def forge_cli(*args, env=None, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "forge", *args], capture_output=True, text=True, env=env, cwd=cwd)


def test_cli_without_dot_prints_one_line_and_no_traceback(tmp_path):
    env = dict(os.environ, PATH=str(tmp_path))
    out = forge_cli("diagram", "-o", str(tmp_path / "loop.svg"), env=env)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert out.stderr.count("\n") == 1 and "Install Graphviz" in out.stderr


def test_cli_prints_mermaid_to_stdout():
    out = forge_cli("diagram", "--format", "mermaid")
    assert out.returncode == 0 and "stateDiagram-v2" in out.stdout


def test_cli_overlays_a_recorded_trace(tmp_path):
    trace = write_trace(known_run().trace, tmp_path / "run.jsonl")
    out = forge_cli("diagram", "--trace", str(trace))
    assert out.returncode == 0 and "choose ×2" in out.stdout


def test_cli_names_a_malformed_definition(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[machine]\nname = 'x'\n")
    out = forge_cli("diagram", str(bad))
    assert out.returncode == 1 and str(bad) in out.stderr and "Traceback" not in out.stderr


def test_cli_names_a_malformed_trace(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    out = forge_cli("diagram", "--trace", str(bad))
    assert out.returncode == 1 and f"{bad}:1:" in out.stderr


def test_shipped_diagrams_are_up_to_date():
    assert stale_diagrams(ROOT / "machines", ROOT / "diagrams") == []


def test_stale_check_finds_missing_outdated_and_orphaned_diagrams(tmp_path):
    machines, out = tmp_path / "machines", tmp_path / "diagrams"
    machines.mkdir()
    source = (ROOT / "machines" / "single_agent.toml").read_text()
    (machines / "loop.toml").write_text(source)
    refresh_gallery(machines, out)
    assert stale_diagrams(machines, out) == []
    (machines / "loop.toml").write_text(source.replace('trigger = "call"', 'trigger = "invoke"'))
    (out / "ghost.mmd").write_text("")
    problems = {(p.path.name, p.problem) for p in stale_diagrams(machines, out)}
    assert problems == {
        ("loop.svg", "rendered from an older definition"),
        ("loop.mmd", "differs from the definition"),
        ("ghost.mmd", "no definition in machines/ draws it"),
    }


def test_shipped_diagrams_fit_800_pixels_wide():
    for svg in sorted((ROOT / "diagrams").glob("*.svg")):
        width = float(re.search(r'<svg width="([\d.]+)pt"', svg.read_text()).group(1))
        assert width * 96 / 72 <= 800, svg.name


def test_a_diagram_has_a_legend_and_no_guard_that_repeats_its_destination():
    source = diagram(load_definition()).source
    assert "ends in" in source and "needs input" in source and "working state" in source
    assert "[decided_verified_success]" not in source and "[decided_repeated_action]" not in source
    assert "[decided_continue]" in source and "[verify_raised]" in source  # these say something the arrow does not


def test_an_overlay_shows_which_tools_ran_on_the_edges_they_took():
    result = known_run()
    overlay = overlay_of(load_definition(), result)
    (call,) = [t for t in load_definition().transitions if t.source == "execute" and t.trigger == "call"]
    assert overlay.edge_tools[call.index] == {"fetch": 1, "read": 1}
    assert "fetch 1 · read 1" in diagram(load_definition(), trace=result).source
