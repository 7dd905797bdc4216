"""A run keeps what a tool returned as it was when it returned: a handler that later changes
the object it returned changes nothing the run recorded (observations, journal, trace), so a
replay from the journal is the run."""

from __future__ import annotations

import asyncio
import threading

from forge import AgentLoop, Finish, Hooks, Intent, Tool


def counter_loop(async_read: bool = False) -> tuple[AgentLoop, dict]:
    database = {"count": 1, "tags": ["a"]}

    def read() -> dict:
        return database

    async def aread() -> dict:
        return database

    def bump() -> str:
        database["count"] += 1
        database["tags"].append("b")
        return "bumped"

    script = [Intent.call("read"), Intent.call("bump"), Intent.call("read")]
    loop = AgentLoop([Tool("read", handler=aread if async_read else read), Tool("bump", handler=bump)],
                     lambda goal, state: script[len(state.observations)] if len(state.observations) < 3 else Finish("x"),
                     lambda o: o.tool_name == "finish")
    return loop, database


def test_an_observation_keeps_the_value_a_tool_returned_though_the_tool_changes_it_later():
    loop, _ = counter_loop()
    result = loop.run("count")
    first, _, last = result.state.observations[:3]
    assert first.payload == {"count": 1, "tags": ["a"]} and last.payload == {"count": 2, "tags": ["a", "b"]}


def test_the_journal_and_the_trace_keep_the_value_as_observed():
    loop, _ = counter_loop()
    result = loop.run("count")
    assert next(entry.value for entry in result.journal if entry.name == "read") == {"count": 1, "tags": ["a"]}
    observed = [record.detail["payload"] for record in result.trace if record.source == "observe"]
    assert observed[0] == '{"count": 1, "tags": ["a"]}'


def test_a_replay_from_the_journal_is_the_run():
    loop, database = counter_loop()
    result = loop.run("count")
    again = loop.replay(result.journal)
    assert again.state.observations == result.state.observations and again.trace == result.trace
    assert database == {"count": 2, "tags": ["a", "b"]}  # bumped once, by the run: the replay called nothing


def test_an_async_tool_s_value_is_kept_as_observed_too():
    loop, _ = counter_loop(async_read=True)
    result = asyncio.run(loop.arun("count"))
    assert result.state.observations[0].payload == {"count": 1, "tags": ["a"]}


def test_a_value_that_cannot_be_copied_is_kept_as_it_is():
    lock = threading.Lock()
    loop = AgentLoop([Tool("lock", handler=lambda: lock)],
                     lambda goal, state: Finish("x") if state.observations else Intent.call("lock"),
                     lambda o: o.tool_name == "finish", hooks=Hooks(codec=_Codec()))
    assert loop.run("lock").state.observations[0].payload is lock


class _Codec:
    def encode(self, value):
        return repr(value)

    def decode(self, data):
        return data


def _observed_before_and_after(value_of, change) -> tuple:
    """The first observation of a `read` tool returning `value_of()`, which `bump` then changes
    with `change(value)`: what the run kept, and the value as it is now."""
    value = value_of()
    script = [Intent.call("read"), Intent.call("bump")]
    loop = AgentLoop([Tool("read", handler=lambda: value), Tool("bump", handler=lambda: change(value) or "bumped")],
                     lambda goal, state: script[len(state.observations)] if len(state.observations) < 2 else Finish("x"),
                     lambda o: o.tool_name == "finish")
    return loop.run("read then bump").state.observations[0].payload, value


def test_containers_inside_a_list_are_kept_as_they_were_when_returned():
    kept, now = _observed_before_and_after(lambda: [{"n": 1}, [1]], lambda v: (v[0].update(n=2), v[1].append(2)))
    assert kept == [{"n": 1}, [1]] and now == [{"n": 2}, [1, 2]]


def test_containers_inside_a_tuple_are_kept_as_they_were_when_returned():
    kept, now = _observed_before_and_after(lambda: ({"n": 1}, [1]), lambda v: (v[0].update(n=2), v[1].append(2)))
    assert kept == ({"n": 1}, [1]) and now == ({"n": 2}, [1, 2])


def test_an_object_with_containers_of_its_own_is_kept_as_it_was_when_returned():
    from dataclasses import dataclass, field

    @dataclass
    class Rows:
        rows: list = field(default_factory=lambda: [1])

    kept, now = _observed_before_and_after(Rows, lambda v: v.rows.append(2))
    assert kept == Rows([1]) and now == Rows([1, 2])
