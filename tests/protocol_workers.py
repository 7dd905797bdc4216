"""What the protocols' durable tests share: the loop `tests/ag_ui_worker_loops.py` makes
(the durable loop "payer"), made in this test process on its runs database (one DBOS per
process), and forgotten after the test, so another test module of the same process can
make it again on its own database."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

LOOPS = str(Path(__file__).with_name("ag_ui_worker_loops.py"))
"""The module `forge worker --loops` is given."""


@contextlib.contextmanager
def payer_on(db: str, ledger: Path, monkeypatch: Any) -> Iterator[Any]:
    """The durable loop "payer" on `db`, its payments logged to `ledger`; closed after."""
    monkeypatch.setenv("FORGE_TEST_DB", db)
    monkeypatch.setenv("FORGE_TEST_LEDGER", str(ledger))
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    sys.modules.pop("ag_ui_worker_loops", None)
    payer = importlib.import_module("ag_ui_worker_loops").payer
    try:
        yield payer
    finally:
        payer.close()
        sys.modules.pop("ag_ui_worker_loops", None)
