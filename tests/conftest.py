import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import pytest


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    """A runs database this test module's process launches DBOS on (one DBOS per process),
    shut down when the module is done."""
    from forge.durable import launch, shutdown

    path = tmp_path_factory.mktemp("durable") / "runs.sqlite"
    launch(path)
    yield path
    shutdown()


@pytest.fixture
def make(db, request):
    """`make(loop, **options)`: a DurableLoop on `db` with a name of its own, closed after the test."""
    from forge.durable import DurableLoop

    made = []

    def durable(loop, **options):
        made.append(DurableLoop(loop, name=f"{request.node.name}-{len(made)}", db=db, **options))
        return made[-1]

    yield durable
    for loop in made:
        loop.close()
