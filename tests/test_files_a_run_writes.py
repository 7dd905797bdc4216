"""What a run writes to files: every value `redact` masks is masked in each of them (trace,
journal lines, cassette), run ids never write outside the trace folder, and a cassette
holds no wall-clock value."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from forge import AgentLoop, Finish, Hooks, Intent, Tool, write_trace
from forge.loop import trace_file_name
from forge.records.trace import read_journal
from forge.testing import write_cassette

SECRET = "s3cr3t-token-4711"


def redact(tool, field, value):
    """Masks send's token only: a redact that is told the wrong tool lets the secret through."""
    if tool != "send":
        return value
    if field == "arguments" and isinstance(value, dict) and "token" in value:
        return {**value, "token": "***"}
    if field == "payload" and isinstance(value, str):
        return value.replace(SECRET, "***")
    return value


SENT: list[str] = []


def send(to: str, token: str) -> str:
    SENT.append(to)
    return f"sent to {to} with {token}"


def every_file_of(folder: Path) -> dict[Path, str]:
    return {path: path.read_text(encoding="utf-8", errors="replace") for path in folder.rglob("*") if path.is_file()}


def decide(goal, state):
    if len(state.observations) < 2:
        return Intent(frozenset({"send"}), {"to": "ann", "token": SECRET})
    return Finish("done")


@pytest.mark.parametrize("approves", [False, True], ids=["refused", "approved"])
def test_no_file_a_run_writes_holds_a_value_redact_masks(tmp_path, monkeypatch, approves):
    monkeypatch.setenv("FORGE_TRACE_DIR", str(tmp_path / "kept"))
    loop = AgentLoop([Tool("send", {"send"}, send, required={"to", "token"}, side_effect=True, repeatable=True)],
                     decide, lambda o: o.tool_name == "finish", definition="approval",
                     approver=lambda *call: approves, hooks=Hooks(redact=redact))
    result = loop.run("send it", run_id="redacted")
    assert result.reason == "verified_success"
    assert any(SECRET in repr(entry.value) for entry in result.journal)  # the run itself saw it
    write_trace(result.trace, tmp_path / "out" / "run.jsonl", journal=result.journal)
    write_cassette(tmp_path / "out" / "cassette.jsonl", result, redact=redact)
    files = every_file_of(tmp_path)
    assert len(files) == 3
    assert [path.name for path, text in files.items() if SECRET in text] == []
    sent = len(SENT)
    assert loop.replay(tmp_path / "out" / "run.jsonl").reason == "verified_success"  # the masked file still replays
    assert len(SENT) == sent  # calling nothing


def test_no_file_a_chat_run_writes_holds_a_value_redact_masks(tmp_path, monkeypatch):
    openai = pytest.importorskip("openai")
    from chat_server import ChatServer, reply

    from forge.models.chat import ChatPolicy

    monkeypatch.setenv("FORGE_TRACE_DIR", str(tmp_path / "kept"))
    with ChatServer([reply(None, ("c1", "send", {"to": "ann", "token": SECRET})), reply("sent")]) as server:
        policy = ChatPolicy("m", client=openai.OpenAI(base_url=server.url, api_key="k"))
        loop = AgentLoop([Tool("send", {"send"}, send, required={"to", "token"}, side_effect=True)], policy,
                         lambda o: o.tool_name == "finish", definition="approval", approver=lambda *call: False,
                         hooks=Hooks(redact=redact))
        result = loop.run("send it", run_id="chat-redacted")
    write_trace(result.trace, tmp_path / "out" / "run.jsonl", journal=result.journal)
    write_cassette(tmp_path / "out" / "cassette.jsonl", result, redact=redact)
    files = every_file_of(tmp_path)
    assert len(files) == 3
    assert [path.name for path, text in files.items() if SECRET in text] == []


def test_two_recordings_of_one_chat_run_are_the_same_cassette(tmp_path):
    openai = pytest.importorskip("openai")
    from chat_server import ChatServer, reply

    from forge.models.chat import ChatPolicy

    written = []
    for number in range(2):
        with ChatServer([reply(None, ("c1", "send", {"to": "ann", "token": "t"})), reply("sent")]) as server:
            policy = ChatPolicy("m", client=openai.OpenAI(base_url=server.url, api_key="k"))
            loop = AgentLoop([Tool("send", {"send"}, send, required={"to", "token"})], policy,
                             lambda o: o.tool_name == "finish")
            result = loop.run("send it", run_id="same")
        written.append(write_cassette(tmp_path / f"{number}.jsonl", result).read_bytes())
    assert b'"started":null' in written[0]
    assert written[0] == written[1]


@pytest.mark.parametrize("run_id", ["../escaped", "/tmp/absolute-forge-probe", "a/../../b", "..", ".hidden",
                                    "nul\x00byte", "lone \udcff surrogate", "x" * 400])
def test_a_run_id_never_writes_outside_the_trace_folder_nor_fails_the_run(tmp_path, monkeypatch, run_id):
    folder = tmp_path / "traces" / "kept"
    monkeypatch.setenv("FORGE_TRACE_DIR", str(folder))
    loop = AgentLoop([Tool("noop", {"noop"}, lambda: "")], lambda goal, state: Finish("ok"), lambda o: True)
    assert loop.run("finish", run_id=run_id).reason == "verified_success"
    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert len(written) == 1 and written[0].parent == folder
    assert not Path("/tmp/absolute-forge-probe.jsonl").exists()


def test_a_plain_run_id_is_its_own_trace_file_name():
    assert trace_file_name("run-2026_12.04") == "run-2026_12.04"
    assert trace_file_name("../x") == "%2E.%2Fx"


def test_a_trace_folder_that_cannot_be_written_is_logged_not_raised(tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("FORGE_TRACE_DIR", str(blocker / "inside"))
    loop = AgentLoop([Tool("noop", {"noop"}, lambda: "")], lambda goal, state: Finish("ok"), lambda o: True)
    with caplog.at_level(logging.WARNING, logger="forge"):
        assert loop.run("finish").reason == "verified_success"
    assert "cannot keep the trace" in caplog.text


def test_what_a_file_keeps_is_the_journal_with_only_what_redact_masks_changed():
    from forge.machine.redaction import redacted_journal
    from forge.machine.stages import request_fingerprint

    def decide_keyed(goal, state):
        if not state.observations:
            return Intent(frozenset({"send"}), {"to": "ann", "token": SECRET}, "pay-ann-once", call_id="c1")
        return Finish("done")

    loop = AgentLoop([Tool("send", {"send"}, send, required={"to", "token"}, side_effect=True)], decide_keyed,
                     lambda o: o.tool_name == "finish", definition="approval", approver=lambda *call: True)
    result = loop.run("send it")
    masked_arguments = {"to": "ann", "token": "***"}
    kept = redacted_journal(result.journal, redact, result.trace)
    assert [(e.kind, e.name, e.transition, e.step) for e in kept] == \
        [(e.kind, e.name, e.transition, e.step) for e in result.journal]
    by_kind = {entry.kind: entry for entry in kept}
    decision = by_kind["policy"].value if isinstance(by_kind["policy"].value, Intent) else kept[0].value
    assert dict(decision.arguments) == masked_arguments
    assert (decision.capabilities, decision.idempotency_key, decision.call_id) == (frozenset({"send"}), "pay-ann-once", "c1")
    assert by_kind["tool"].identity == masked_arguments and by_kind["tool"].value == "sent to ann with ***"
    assert by_kind["approver"].identity == request_fingerprint("send", masked_arguments)
    assert kept[-1].value == result.journal[-1].value  # verify's answer kept as it was


def test_a_decision_by_capability_is_masked_as_the_tool_its_step_called_even_without_records():
    from forge.machine.redaction import redacted_journal

    loop = AgentLoop([Tool("send", {"send"}, send, required={"to", "token"}, side_effect=True, repeatable=True)],
                     decide, lambda o: o.tool_name == "finish")
    result = loop.run("send it")
    kept = redacted_journal(result.journal, redact)
    decisions = [e.value for e in kept if e.kind == "policy" and isinstance(e.value, Intent)]
    assert [dict(d.arguments) for d in decisions] == [{"to": "ann", "token": "***"}] * 2
    assert SECRET not in repr(kept)


def test_a_masked_decision_names_the_tool_it_named():
    from forge.machine.redaction import redacted_journal

    def by_name(goal, state):
        return Intent.call("send", to="ann", token=SECRET) if not state.observations else Finish("done")

    loop = AgentLoop([Tool("send", {"send"}, send, required={"to", "token"}, side_effect=True)], by_name,
                     lambda o: o.tool_name == "finish")
    result = loop.run("send it")
    (decision,) = [e.value for e in redacted_journal(result.journal, redact) if isinstance(e.value, Intent)]
    assert decision.tool == "send" and decision.arguments["token"] == "***"


def test_the_trace_keeps_the_arguments_redact_returned():
    import json

    loop = AgentLoop([Tool("send", {"send"}, send, required={"to", "token"}, side_effect=True, repeatable=True)],
                     decide, lambda o: o.tool_name == "finish", hooks=Hooks(redact=redact))
    result = loop.run("send it")
    selected = next(record for record in result.trace if record.verdict == "selected")
    assert json.loads(selected.detail["arguments"]) == {"to": "ann", "token": "***"}


def test_a_chat_cassette_written_through_redact_replays_with_the_model_gone(tmp_path):
    openai = pytest.importorskip("openai")
    from chat_server import ChatServer, reply

    from forge.models.chat import ChatPolicy

    def chat_loop(url: str) -> AgentLoop:
        policy = ChatPolicy("m", client=openai.OpenAI(base_url=url, api_key="k", max_retries=0))
        return AgentLoop([Tool("send", {"send"}, send, required={"to", "token"}, side_effect=True)], policy,
                         lambda o: o.tool_name == "finish", hooks=Hooks(redact=redact))

    with ChatServer([reply(None, ("c1", "send", {"to": "ann", "token": SECRET})), reply("sent")]) as server:
        result = chat_loop(server.url).run("send it", run_id="chat-masked")
    path = write_cassette(tmp_path / "cassette.jsonl", result, redact=redact)
    assert SECRET not in path.read_text()
    models = [entry for entry in read_journal(path) if entry.kind == "model"]
    assert models[0].value["message"]["tool_calls"][0]["function"]["arguments"] == '{"to": "ann", "token": "***"}'
    assert models[1].identity["messages"][-1]["content"] == "sent to ann with ***"
    sent = len(SENT)
    replayed = chat_loop("http://127.0.0.1:9/v1").replay(path)
    assert (replayed.reason, replayed.answer) == (result.reason, result.answer) == ("verified_success", "sent")
    assert len(SENT) == sent


def test_a_payload_field_redact_masks_is_masked_in_the_json_text_a_chat_tool_message_carries(tmp_path, monkeypatch):
    """A redact that masks a field of a tool's result (a dict) masks it in every form the
    value takes: the observation's payload, and the JSON text the chat policy sends the model
    as the tool message, kept by the trace, the journal's model requests and the cassette."""
    openai = pytest.importorskip("openai")
    from chat_server import ChatServer, reply

    from forge.models.chat import ChatPolicy

    card = "4111-1111-1111-1111"

    def customer(name: str) -> dict:
        return {"name": name, "card": card}

    def masking(tool, field, value):
        if tool == "customer" and field == "payload" and isinstance(value, dict) and "card" in value:
            return {**value, "card": "****"}
        return value

    monkeypatch.setenv("FORGE_TRACE_DIR", str(tmp_path / "kept"))
    with ChatServer([reply(None, ("c1", "customer", {"name": "ann"})), reply("ann's card is on file")]) as server:
        policy = ChatPolicy("m", client=openai.OpenAI(base_url=server.url, api_key="k"))
        loop = AgentLoop([Tool("customer", {"customer"}, customer, required={"name"})], policy,
                         lambda o: o.tool_name == "finish", hooks=Hooks(redact=masking))
        result = loop.run("look ann up", run_id="card-redacted")
    assert any(card in str(m.get("content")) for m in server.requests[1]["messages"])  # the model itself saw it
    write_trace(result.trace, tmp_path / "out" / "run.jsonl", journal=result.journal)
    write_cassette(tmp_path / "out" / "cassette.jsonl", result, redact=masking)
    files = every_file_of(tmp_path)
    assert len(files) == 3
    assert [path.name for path, text in files.items() if card in text] == []
    assert all("****" in text for text in files.values())
