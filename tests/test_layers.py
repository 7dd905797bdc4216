"""forge's modules form layers that import one way: no cycle, at run time or for type
checking, and no module imports a layer above its own."""

from __future__ import annotations

import ast
from pathlib import Path

FORGE = Path(__file__).resolve().parent.parent / "forge"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("forge.errors", "forge.files", "forge.user_code", "forge.bounded", "forge.chat_server", "forge.extras",
     "forge.moved"),
    ("forge.agent",),
    ("forge.policy", "forge.tools", "forge.options", "forge.models.compaction", "forge.output", "forge.guardrails",
     "forge.records"),
    ("forge.machine.performers", "forge.result", "forge.observe", "forge.narrate", "forge.events"),
    ("forge.machine", "forge.mcp", "forge.models"),
    ("forge.diagram", "forge.check", "forge.inspect"),
    ("forge.debug", "forge.spec", "forge.running"),
    ("forge.durable", "forge.running.stream", "forge.running.replaying"),
    ("forge.loop",),
    ("forge.code_tool",),
    ("forge.scenario", "forge.demo", "forge.cover", "forge.testing",
     "forge.ui", "forge.evals", "forge.serve", "forge.protocols"),
    ("forge.cli", "forge.__main__", "forge"),
)
"""Bottom to top; a module belongs to the longest entry that is it or a package holding it.
A moved module's old name is no file (`forge.moved`), so it has no place here."""

KNOWN: dict[tuple[str, str], str] = {
    ("forge.agent.runner", "forge.result"):
        "the seed's runner returns the LoopResult that the machine's runs fill in; moving LoopResult below "
        "the machine's records is left for the Run redesign (issue 25, items 1 and 2)",
}
"""Edges that break the layering, each with why it is still there."""


def _modules() -> dict[str, Path]:
    found = {}
    for path in FORGE.rglob("*.py"):
        parts = path.relative_to(FORGE.parent).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _owner(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> set[str]:
    """Every forge module `module` imports anywhere: at the top, in functions, or under
    TYPE_CHECKING."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            names = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            owner = _owner(name) if name == "forge" or name.startswith("forge.") else None
            if owner is not None and owner != module and not (owner == "forge" and name != "forge"):
                found.add(owner)
    return found


GRAPH = {module: _imports(module) for module in MODULES}


def _layer(module: str) -> int:
    if module == "forge":
        return len(LAYERS) - 1
    holding = [(len(member), number) for number, members in enumerate(LAYERS) for member in members
               if member != "forge" and (module == member or module.startswith(member + "."))]
    return max(holding)[1] if holding else -1


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for after in sorted(graph[node]):
            if after not in index:
                visit(after)
                low[node] = min(low[node], low[after])
            elif after in on_stack:
                low[node] = min(low[node], index[after])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_no_import_cycle_between_forges_modules():
    assert _cycles(GRAPH) == []


def _entry(module: str) -> str:
    """The file or folder at `forge/`'s top that holds `module`."""
    return module.split(".")[1] if "." in module else module


def test_no_knot_between_the_folders_and_files_at_forges_top():
    """Read folder by folder, forge imports one way too (issue 49, item 4): no two entries
    at `forge/`'s top import each other, however indirectly, but through a `KNOWN` seam."""
    entries: dict[str, set[str]] = {_entry(module): set() for module in MODULES}
    for module, targets in GRAPH.items():
        entries[_entry(module)] |= {_entry(target) for target in targets
                                    if _entry(target) != _entry(module) and (module, target) not in KNOWN}
    assert _cycles(entries) == []


def test_every_module_has_a_layer():
    assert [module for module in MODULES if _layer(module) < 0] == []


def test_imports_only_go_down_or_across_a_layer():
    upward = [f"{module} (layer {_layer(module)}) imports {target} (layer {_layer(target)})"
              for module, targets in sorted(GRAPH.items()) for target in sorted(targets)
              if _layer(target) > _layer(module) and (module, target) not in KNOWN]
    assert upward == []


def test_the_stage_contracts_import_nothing_of_the_machine():
    outside = {f"{module} imports {target}" for module, targets in GRAPH.items() if module.startswith("forge.agent")
               for target in targets if not (target.startswith("forge.agent") or target == "forge.errors")
               and (module, target) not in KNOWN}
    assert outside == set()


PRIVATE_SEAMS: dict[tuple[str, str], str] = {
    ("forge/cli/__init__.py", "_actions"): "argparse keeps a parser's subcommands only there (reference_markdown lists them)",
    ("forge/cli/__init__.py", "_SubParsersAction"): "argparse's class of that action, to find it among _actions",
    ("forge/durable/runs.py", "_sys_db"): "DBOS's client reads one workflow's event per call; a page's events are "
                                          "read in one query of its system database",
    ("forge/durable/worker.py", "_recover_pending_workflows"): "what DBOS's own launch calls to recover an "
                                                               "executor's runs; no public call does it",
    ("forge/models/chat.py", "_custom_headers"): "openai's client keeps the headers it was made with only there "
                                         "(an async twin is made with the same ones)",
    ("forge/models/chat.py", "_custom_query"): "as _custom_headers, for the query",
}
"""Private attributes of other libraries forge reads, each with why (no forge module reads
a private attribute of another forge module)."""


def _own_names(tree: ast.AST) -> set[str]:
    """The names a module defines or binds itself: its functions, classes, names and
    imports, and the attributes it sets on `self` or `cls`."""
    own: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            own.add(node.attr)
        elif isinstance(node, ast.Name):
            own.add(node.id)
        elif isinstance(node, ast.alias):
            own.add(node.asname or node.name.split(".")[-1])
    return own


def test_no_module_reads_a_private_attribute_it_does_not_define():
    """A loop's parts are read through `LoopSpec` (issue 49), not `loop._config`; the only
    private reads left are other libraries' seams, each said why in PRIVATE_SEAMS."""
    found = set()
    for path in sorted(FORGE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        own = _own_names(tree)
        shown = str(path.relative_to(FORGE.parent))
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
                    and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                    and node.attr not in own):
                found.add((shown, node.attr))
    assert found - set(PRIVATE_SEAMS) == set()


def test_the_architecture_page_names_every_entry_of_the_package():
    """docs/architecture.md says what each file and folder at `forge/`'s top is (issue 49,
    item 4): a new one is named there when it is made."""
    page = (FORGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    entries = sorted(path.name for path in FORGE.iterdir() if path.name != "__pycache__")
    unnamed = [name for name in entries if f"forge/{name}" not in page]
    assert unnamed == []


def drawing(width: int = 96) -> str:
    """The layers as docs/architecture.md draws them, the top first: each row's number and
    its modules (`forge.` left out), wrapped at `width`. Regenerate the page's drawing with
    `python -c "import sys; sys.path.insert(0, 'tests'); from test_layers import drawing; print(drawing())"`."""
    rows = []
    for number, layer in reversed(list(enumerate(LAYERS, start=1))):
        names = [name if name == "forge" else name.removeprefix("forge.") for name in layer]
        line = f"{number:>2} │"
        for name in names:
            if len(line) + 1 + len(name) > width:
                rows.append(line)
                line = "   │"
            line += f" {name}"
        rows.append(line)
    return "\n".join(rows)


def test_the_architecture_page_draws_the_layers_this_test_enforces():
    """docs/architecture.md draws the layers (issue 49, item 4) from `LAYERS` itself: a
    module moved between layers here is moved on the page too."""
    page = (FORGE.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert f"```text\n{drawing()}\n```" in page, "docs/architecture.md's drawing of the layers is stale: " \
        "regenerate it as `drawing` says"
