"""A durable run killed with SIGKILL in the middle of calls made together: on recovery a call
whose outcome was stored before the crash is not made again (its outcome is the stored one);
only the call running at the crash is made again, with the same idempotency key."""

import json
import subprocess
import sys
from pathlib import Path

AGENT = str(Path(__file__).with_name("durable_batch.py"))


def _run(folder, *options):
    return subprocess.run([sys.executable, AGENT, str(folder / "runs.sqlite"), str(folder / "calls"), "batch-1",
                           *options], capture_output=True, text=True, timeout=180)


def test_a_call_of_a_batch_that_returned_before_the_crash_is_not_made_again_on_recovery(tmp_path):
    killed = _run(tmp_path, "--crash")
    assert killed.returncode == -9, killed.stderr[-2000:]
    recovered = _run(tmp_path)
    assert recovered.returncode == 0, recovered.stderr[-3000:]
    assert json.loads(recovered.stdout.splitlines()[-1]) == {"status": "finished", "reason": "verified_success",
                                                            "answer": "quick text + slow text"}
    calls = (tmp_path / "calls").read_text().splitlines()
    quick = [line for line in calls if line.startswith("read\tquick\t")]
    slow = [line for line in calls if line.startswith("read\tslow\t")]
    assert len(quick) == 1, calls  # its outcome was stored: answered from the database on recovery
    assert len(slow) == 2 and slow[0] == slow[1], calls  # running at the crash: made again, with the same key


def test_each_call_of_a_batch_has_an_idempotency_key_of_its_own(tmp_path):
    done = _run(tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    keys = [line.split("\t")[2] for line in (tmp_path / "calls").read_text().splitlines()]
    assert sorted(keys) == ["batch-1/1/read/1", "batch-1/1/read/2"]  # made at the same time: in either order
