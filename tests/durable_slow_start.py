"""The loops of durable_workers.py, in a worker whose DBOS is slow to finish launching (as a
PostgreSQL database under load is): its queue is registered two seconds after DBOS starts
handing out queued runs, which is the window in which a worker used to take runs it could
not run yet. `forge worker --loops tests/durable_slow_start.py`."""

import time

from dbos import DBOS
from durable_workers import counting, filing, holding  # noqa: F401  (the loops this worker serves)

_register = DBOS.register_queue


def _slowly(*args, **kwargs):
    time.sleep(2.0)  # DBOS is launched and dequeuing by now
    return _register(*args, **kwargs)


DBOS.register_queue = _slowly
