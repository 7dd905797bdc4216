"""Modules that moved keep their old import names (issue 49, item 4: the model policies and
what their calls cost sit together in `forge.models`): the old name imports the same
names, says where they are now with a DeprecationWarning, and a value stored under the old
name (a legacy pickled journal) is read back."""

from __future__ import annotations

import importlib
import pickle
import sys
import warnings

import pytest

from forge.moved import MOVED as TABLE

MOVED = sorted(TABLE.items())


@pytest.mark.parametrize(("old", "new"), MOVED)
def test_an_old_module_name_imports_the_same_names_and_says_where_they_are_now(old, new, monkeypatch):
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=f"{old} is {new} now"):
        moved = importlib.import_module(old)
    made = importlib.import_module(new)
    assert made.__all__ and all(getattr(moved, name) is getattr(made, name) for name in made.__all__)


def test_a_value_stored_under_an_old_module_name_is_read_back(monkeypatch):
    from forge.records.usage import ModelCall

    monkeypatch.delitem(sys.modules, "forge.usage", raising=False)
    with pytest.warns(DeprecationWarning):
        assert pickle.loads(b"cforge.usage\nModelCall\n.") is ModelCall


def test_forge_itself_imports_no_old_name():
    import subprocess

    done = subprocess.run([sys.executable, "-W", "error::DeprecationWarning", "-c",
                           "import forge, forge.cli, forge.loop, forge.models.chat, forge.models.fallback, "
                           "forge.protocols.a2a, forge.protocols.ag_ui, forge.mcp; "
                           "from forge import AgentLoop, Usage, BudgetExhausted"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_warning_names_the_line_that_imports_the_old_name(monkeypatch):
    monkeypatch.delitem(sys.modules, "forge.llm", raising=False)
    with pytest.warns(DeprecationWarning) as told:
        import forge.llm  # noqa: F401
    assert told[0].filename == __file__


def test_a_name_the_new_module_lacks_is_an_attribute_error_naming_it(monkeypatch):
    monkeypatch.delitem(sys.modules, "forge.usage", raising=False)
    with pytest.warns(DeprecationWarning):
        old = importlib.import_module("forge.usage")
    with pytest.raises(AttributeError, match="no_such_name"):
        old.no_such_name  # noqa: B018


def test_an_error_recorded_under_a_moved_modules_old_name_is_read_back_as_its_class():
    from forge.records.definition import DefinitionError
    from forge.records.recorded import error_from

    read = error_from({"type": "forge.machine.definition:DefinitionError", "kind": "error",
                       "message": "no initial state", "args": ["no initial state"]})
    assert type(read) is DefinitionError and str(read) == "no initial state"


def test_a_legacy_pickle_naming_a_moved_module_is_read_without_importing_its_old_name():
    from forge.durable.legacy import read_legacy
    from forge.records.journal import ForkOrigin

    stored = pickle.dumps(ForkOrigin("run-1", 3)).replace(b"forge.records.journal", b"forge.machine.journal")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert read_legacy(stored) == ForkOrigin("run-1", 3)
