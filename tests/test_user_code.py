"""Loading a user's Python file by its path (`forge.user_code.import_file`), as `python
path/to/file.py` would."""

from __future__ import annotations

import sys

import pytest

from forge.errors import UsageError
from forge.user_code import import_file


def test_a_file_that_defines_a_dataclass_loads(tmp_path):
    (tmp_path / "agent.py").write_text("from dataclasses import dataclass\n\n@dataclass\nclass Planner:\n"
                                       "    folder: str = 'notes'\n\nPLANNER = Planner()\n")
    assert import_file(tmp_path / "agent.py").PLANNER.folder == "notes"


def test_a_file_that_fails_to_load_names_the_error_and_is_not_left_imported(tmp_path):
    (tmp_path / "broken_agent.py").write_text("raise RuntimeError('no key')\n")
    with pytest.raises(UsageError, match="failed to load: RuntimeError: no key"):
        import_file(tmp_path / "broken_agent.py")
    assert "forge_scenario_broken_agent" not in sys.modules
