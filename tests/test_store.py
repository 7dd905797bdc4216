"""A store any process can read, and no code in it (issue 48, item 4): everything forge keeps
of a durable run is JSON in the wire form; `forge ui`, `forge runs` and the JSON API read any
run without the user's modules; a typed answer is the user's type again only in the user's
process; a database forge 0.1.0 made (with pickle) still reads, runs no code when read, and
its waiting run goes on.

This module's process launches DBOS on a copy of `data/store-0.1.0.sqlite.gz` (made by
`legacy_store.py` at 0.1.0), with the executor name that release's runs have ("local"):
today's runs are made in the same database, beside the old ones."""

import base64
import gzip
import http.client
import json
import os
import pickle
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from builders import forge

from forge import AgentLoop, Finish, Hooks, Intent, Tool
from forge.durable import Answer, database_url, launch, shutdown
from forge.durable.legacy import read_legacy
from forge.durable.runs import StoredRuns
from forge.errors import UsageError

pytest.importorskip("pydantic", reason="typed answers are validated by pydantic: the schema extra")

LEGACY = Path(__file__).with_name("data") / "store-0.1.0.sqlite.gz"
SHOP = textwrap.dedent('''
    from pydantic import BaseModel


    class Order(BaseModel):
        item: str
        count: int
''')


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The 0.1.0 database, copied, with this process's DBOS launched on it, and the loop
    0.1.0's waiting run names made first (so that launching recovers that run here)."""
    folder = tmp_path_factory.mktemp("store")
    path = folder / "runs.sqlite"
    path.write_bytes(gzip.decompress(LEGACY.read_bytes()))
    asking = asking_loop().durable("asking", db=path)
    launch(path)
    yield path
    asking.close()
    shutdown()


def asking_loop():
    """0.1.0's loop "asking" (`legacy_store.py`): ships the goal's last word, once approved."""
    def policy(goal, state):
        if not state.observations:
            return Intent.call("ship", item=goal.split()[-1]).keyed(f"ship-{goal.split()[-1]}")
        return Finish(state.observations[-1].payload)

    return AgentLoop([Tool("ship", {"ship"}, ship, required={"item"}, side_effect=True),
                      Tool("broken", {"ship"}, ship, required={"item"})], policy, finished,
                     definition="approval", approver=lambda request: None)


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    """The user's module `shop` (an `Order` model), importable in this process only."""
    folder = tmp_path_factory.mktemp("shop")
    (folder / "shop.py").write_text(SHOP)
    sys.path.insert(0, str(folder))
    import shop as module

    yield module
    sys.path.remove(str(folder))


def finished(observation):
    return observation.tool_name == "finish"


def ship(item: str) -> dict:
    return {"shipped": item}


def ordering(goal, state):
    if not state.observations:
        return Intent.call("ship", item=goal.split()[-1]).keyed(f"ship-{goal.split()[-1]}")
    return Finish({"item": goal.split()[-1], "count": 2})


def rows_of(db):
    """Every value forge and DBOS stored in `db`: (table, column, serialization, value)."""
    found = []
    columns = {"workflow_status": ("inputs", "output", "error"), "workflow_input": ("inputs",),
               "workflow_output": ("output", "error"), "workflow_events": ("value",),
               "workflow_events_history": ("value",), "notifications": ("message",),
               "operation_outputs": ("output", "error")}
    with sa.create_engine(database_url(db)).connect() as connection:
        for table, names in columns.items():
            present = {row[1] for row in connection.exec_driver_sql(f"pragma table_info({table})")}
            serialization = "serialization" if "serialization" in present else "NULL"
            for name in names:
                for value, kind in connection.exec_driver_sql(
                        f"select {name}, {serialization} from {table} where {name} is not null"):
                    found.append((table, name, kind, value))
        for table, name in (("forge_journal", "entry"), ("forge_idempotency", "value")):
            for (value,) in connection.exec_driver_sql(f"select {name} from {table}"):
                found.append((table, name, "forge", bytes(value)))
    return found


def reader(db, *code):
    """Python run in a fresh process with neither `shop` nor the tests on its path."""
    script = "import json, sys\nfrom forge.durable.runs import StoredRuns\n" + "\n".join(code)
    done = subprocess.run([sys.executable, "-c", script, str(db)], capture_output=True, text=True, timeout=120,
                          cwd=Path(db).parent)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_every_value_a_run_stores_today_is_json_in_the_wire_form(store, shop, tmp_path):
    durable = AgentLoop([Tool("ship", {"ship"}, ship, required={"item"}, side_effect=True)], ordering, finished,
                        output=shop.Order).durable("store-typed", db=store)
    try:
        first = durable.run("order kappa", run_id="json-typed")
        durable.run("order lambda", run_id="json-going-on", state=first)
        durable.wait(durable.fork("json-typed", at=1), timeout=60)
    finally:
        durable.close()
    today = [row for row in rows_of(store) if "json-" in json.dumps(row[3] if isinstance(row[3], str) else
                                                                       row[3].decode("utf-8", "replace"))]
    assert today, "the runs stored rows"
    for table, column, kind, value in today:
        assert kind in ("forge_wire", "forge", None, "portable_json"), (table, column, kind)
        text = value.decode() if isinstance(value, bytes) else value
        json.loads(text)  # JSON, not a pickle
    assert not any(kind == "py_pickle" for _, _, kind, value in rows_of(store)
                   if "json-" in (value if isinstance(value, str) else value.decode("utf-8", "replace")))


def test_in_the_users_process_a_typed_answer_is_its_type_again(store, shop):
    durable = AgentLoop([Tool("ship", {"ship"}, ship, required={"item"}, side_effect=True)], ordering, finished,
                        output=shop.Order).durable("store-typed-again", db=store)
    try:
        result = durable.run("order mu", run_id="typed-again")
        assert result.answer == shop.Order(item="mu", count=2) and isinstance(result.answer, shop.Order)
    finally:
        durable.close()


def test_a_typed_answer_reads_in_another_process_as_its_json_without_the_users_module(store, shop):
    durable = AgentLoop([Tool("ship", {"ship"}, ship, required={"item"}, side_effect=True)], ordering, finished,
                        output=shop.Order).durable("store-typed-elsewhere", db=store)
    try:
        durable.run("order nu", run_id="typed-elsewhere")
    finally:
        durable.close()
    out = reader(store, "with StoredRuns(sys.argv[1]) as runs:",
                 "    run = runs.get('typed-elsewhere')",
                 "    print(json.dumps([run.status, run.reason, run.answer, 'shop' in sys.modules]))")
    assert json.loads(out) == ["finished", "verified_success", {"item": "nu", "count": 2}, False]
    shown = forge("runs", "show", "typed-elsewhere", "--db", str(store), cwd=store.parent)
    assert shown.returncode == 0, shown.stderr
    assert "verified_success" in shown.stdout and "Traceback" not in shown.stderr
    assert 'answer: {"item": "nu", "count": 2}' in shown.stdout.splitlines()  # JSON, not a Python repr


def test_a_run_forge_0_1_0_stored_reads_without_the_users_code(store):
    out = reader(store, "with StoredRuns(sys.argv[1]) as runs:",
                 "    shown = {}",
                 "    for run_id in ('typed', 'keyed', 'failed', 'waiting', 'keyed-fork-1', 'going-on'):",
                 "        run = runs.get(run_id)",
                 "        first = run.state.observations[0].payload if run.state and run.state.observations else None",
                 "        shown[run_id] = [run.status, run.reason, run.answer, repr(first), len(runs.under_way(run_id))]",
                 "    print(json.dumps(shown))")
    shown = json.loads(out)
    assert shown["typed"][:3] == ["finished", "verified_success", {"item": "beta", "count": 2}]
    assert shown["keyed"][:3] == ["finished", "verified_success", {"shipped": "gamma"}]
    assert shown["failed"][1] == "fatal_error" and "OutOfStock('no delta left')" in shown["failed"][3]
    assert shown["waiting"][0] == "waiting" and shown["keyed-fork-1"][1] == "verified_success"
    assert shown["going-on"][2] == {"shipped": "epsilon"}
    assert [counts[4] for counts in shown.values()] == [5, 5, 2, 2, 4, 5]
    for run_id in ("typed", "failed", "waiting"):
        listed = forge("runs", "show", run_id, "--db", str(store), cwd=store.parent)
        assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr


def test_forge_ui_and_its_json_api_open_every_run_forge_0_1_0_stored(store):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([sys.executable, "-m", "forge", "ui", "--db", str(store), "--port", str(port),
                                "--read-only"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               cwd=store.parent)
    try:
        token = process.stdout.readline().strip().split("token=")[1]
        for run_id in ("typed", "keyed", "failed", "waiting", "keyed-fork-1", "going-on"):
            for path in (f"/api/runs/{run_id}", f"/runs/{run_id}?token={token}"):
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                connection.request("GET", path, headers={"Authorization": f"Bearer {token}",
                                                         "Host": f"127.0.0.1:{port}"})
                response = connection.getresponse()
                body = response.read().decode()
                assert response.status == 200, (path, body[:300])
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", "/api/runs/typed", headers={"Authorization": f"Bearer {token}",
                                                              "Host": f"127.0.0.1:{port}"})
        assert json.loads(connection.getresponse().read())["answer"] == {"item": "beta", "count": 2}
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", f"/runs/typed?token={token}", headers={"Host": f"127.0.0.1:{port}"})
        assert "answer: {&quot;item&quot;: &quot;beta&quot;, &quot;count&quot;: 2}" in connection.getresponse().read().decode()
    finally:
        process.terminate()
        process.communicate(timeout=30)


def test_the_run_forge_0_1_0_left_waiting_goes_on_when_approved(store):
    """Its journal's first rows are 0.1.0's pickles; the rows after the approval are JSON."""
    with StoredRuns(store) as runs:
        waiting = runs.get("waiting")
        assert waiting.status == "waiting" and waiting.waiting.tool == "ship"
        done = runs.resume("waiting", Answer.approve(waiting.waiting.fingerprint), 60, wait=True)
    assert (done.status, done.reason, done.answer) == ("finished", "verified_success", {"shipped": "alpha"})
    with sa.create_engine(database_url(store)).connect() as connection:
        rows = [bytes(row[0]) for row in connection.exec_driver_sql(
            "select entry from forge_journal where run_id = 'waiting' order by turn, seq")]
    assert rows[0][:1] == b"\x80" and all(row[:1] == b"{" for row in rows[2:]) and len(rows) > 2


class _Runs:
    """What a hostile row would run if it were unpickled: it writes a file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_reading_a_pickled_row_runs_no_code_it_names(store, tmp_path):
    marker = tmp_path / "ran"
    hostile = pickle.dumps(_Runs(marker))
    assert read_legacy(hostile) is not None and not marker.exists()
    state = "select value from workflow_events where workflow_uuid = 'keyed' and key = 'state'"
    with sa.create_engine(database_url(store)).begin() as connection:
        kept = connection.execute(sa.text(state)).scalar_one()
        connection.execute(sa.text("insert into forge_journal (run_id, turn, seq, entry) values ('typed', 1, 99, :e)"),
                           {"e": hostile})
        connection.execute(sa.text("update workflow_events set value = :v where workflow_uuid = 'keyed' "
                                   "and key = 'state'"), {"v": base64.b64encode(hostile).decode()})
    try:
        with StoredRuns(store) as runs:
            with pytest.raises(UsageError, match="journal row 5 is neither a call nor a marker"):
                runs.under_way("typed")
            assert runs.get("keyed").state is None
        shown = forge("runs", "show", "keyed", "--db", str(store), cwd=store.parent)
        assert shown.returncode == 0, shown.stderr
        time.sleep(0.2)
        assert not marker.exists()
    finally:
        with sa.create_engine(database_url(store)).begin() as connection:
            connection.execute(sa.text("delete from forge_journal where run_id = 'typed' and seq = 99"))
            connection.execute(sa.text("update workflow_events set value = :v where workflow_uuid = 'keyed' "
                                       "and key = 'state'"), {"v": kept})


def test_a_tool_result_with_no_json_form_errors_the_run_naming_the_call_and_the_codec(store):
    durable = AgentLoop([Tool("tags", {"read"}, lambda: {"a", "b"})], lambda goal, state: Intent.call("tags")
                        if not state.observations else Finish("done"), finished).durable("store-set", db=store)
    try:
        result = durable.run("read the tags", run_id="set-valued", timeout=60)
    finally:
        durable.close()
    assert result.status == "error", result
    assert "tool 'tags'" in result.error and "codec" in result.error and "set" in result.error


class SetCodec:
    """Sets as sorted lists."""

    def encode(self, value):
        if not isinstance(value, (set, frozenset)):
            raise TypeError(f"not a set: {type(value).__name__}")
        return sorted(value)

    def decode(self, data):
        return set(data)


def test_a_codec_stores_what_json_cannot_and_a_reader_without_it_sees_what_it_wrote(store):
    durable = AgentLoop([Tool("tags", {"read"}, lambda: {"a", "b"})],
                        lambda goal, state: Intent.call("tags") if not state.observations
                        else Finish(sorted(state.observations[-1].payload)), finished,
                        hooks=Hooks(codec=SetCodec())).durable("store-codec", db=store)
    try:
        result = durable.run("read the tags", run_id="codec-valued")
        assert result.answer == ["a", "b"] and result.state.observations[0].payload == {"a", "b"}
    finally:
        durable.close()
    with StoredRuns(store) as runs:
        assert runs.get("codec-valued").state.observations[0].payload == {"$codec": ["a", "b"]}

