"""`await loop.arun(goal)`: the same definition on transitions' AsyncMachine."""

import asyncio

import pytest
from builders import Recorder, intent, scripted_loop, tool

from forge import AgentLoop, AsyncNotSupported, Clocks, Hooks, Intent, Retry, ScriptedPolicy, Stage, Tool, TransientToolError


async def aread(path: str) -> str:
    await asyncio.sleep(0)
    return path.upper()


def read(path: str) -> str:
    return path.upper()


def _copy_loop(reader, writer, policy_async=False, verify_async=False, **options):
    written = {}

    def write(path, text):
        written[path] = text
        return len(text)

    async def awrite(path, text):
        await asyncio.sleep(0)
        return write(path, text)

    def plan(goal, state):
        if state.step_count == 0:
            return Intent({"read"}, {"path": "todo"})
        return Intent({"write"}, {"path": "done", "text": state.observations[-1].payload})

    async def aplan(goal, state):
        await asyncio.sleep(0)
        return plan(goal, state)

    def check(observation):
        return observation.tool_name == "write" and written.get("done") == "TODO"

    async def acheck(observation):
        await asyncio.sleep(0)
        return check(observation)

    tools = [Tool("read", {"read"}, reader, required={"path"}),
             Tool("write", {"write"}, awrite if writer == "async" else write, required={"path", "text"},
                  side_effect=True)]
    return AgentLoop(tools, aplan if policy_async else plan, acheck if verify_async else check, **options)


def test_async_tools_policy_and_verify_run_to_verified_success():
    result = asyncio.run(_copy_loop(aread, "async", policy_async=True, verify_async=True).arun("copy"))
    assert (result.reason, result.steps, result.error) == ("verified_success", 2, None)
    assert result.side_effects_run == 1


def test_an_async_run_traces_exactly_as_the_sync_run_of_the_same_script():
    sync = _copy_loop(read, "sync").run("copy")
    mixed = asyncio.run(_copy_loop(aread, "async", policy_async=True, verify_async=True).arun("copy"))
    plain = asyncio.run(_copy_loop(read, "sync").arun("copy"))
    assert mixed.trace == sync.trace == plain.trace
    assert [o.payload for o in mixed.state.observations] == [o.payload for o in sync.state.observations]


def test_an_async_tool_under_run_is_refused_before_anything_runs():
    handler = Recorder()

    async def fetch():
        handler()

    loop = scripted_loop([tool("fetch", handler=fetch)], [intent("fetch")])
    with pytest.raises(AsyncNotSupported, match=r"tool 'fetch' is an `async def`; run\(\) cannot await it: "
                                                r"use `await loop.arun\(goal\)`"):
        loop.run("goal")
    assert handler.calls == []
    with pytest.raises(AsyncNotSupported, match="the policy"):
        AgentLoop([tool("a")], _async_policy, lambda o: True).run("goal")
    with pytest.raises(AsyncNotSupported, match="verify"):
        AgentLoop([tool("a")], ScriptedPolicy([intent("a")]), _async_verify).debug("goal")


async def _async_policy(goal, state):
    return intent("a")


async def _async_verify(observation):
    return True


def test_a_sync_function_returning_a_coroutine_under_run_fails_the_run_clearly():
    loop = scripted_loop([tool("lazy", handler=lambda: aread("x"))], [intent("lazy")])
    result = loop.run("goal")
    assert result.reason == "fatal_error"
    assert isinstance(result.error, AsyncNotSupported) and "use `await loop.arun(goal)`" in str(result.error)
    (call,) = [entry for entry in result.journal if entry.kind == "tool"]
    assert isinstance(call.error, AsyncNotSupported) and call.value is None


def test_async_retries_wait_with_the_async_sleep():
    waits = []

    async def asleep(seconds):
        waits.append(seconds)

    attempts = Recorder(TransientToolError("503", retry_after=2.0), TransientToolError("503"), "ok")

    async def flaky():
        return attempts()

    loop = scripted_loop([tool("a", handler=flaky)], [intent("a")], verify=lambda o: True,
                         retry=Retry(base_delay=1.0),
                         clocks=Clocks(random=lambda: 0.5, async_sleep=asleep,
                                       sleep=lambda s: pytest.fail("arun must not block in time.sleep")))
    result = asyncio.run(loop.arun("goal"))
    assert result.reason == "verified_success" and result.retries == 2
    assert waits == [2.0, 1.0]


def test_an_identical_async_side_effect_runs_once_and_is_replayed():
    calls = []

    async def send(to):
        calls.append(to)
        return "sent"

    loop = scripted_loop([Tool("send", {"send"}, send, required={"to"}, side_effect=True)],
                         [intent("send", to="a"), intent("send", to="a")], verify=lambda o: o.sequence == 2)
    result = asyncio.run(loop.arun("goal"))
    assert calls == ["a"] and (result.side_effects_run, result.side_effects_replayed) == (1, 1)


def test_a_thousand_concurrent_runs_each_end_correctly():
    async def slow(n):
        await asyncio.sleep(0.01)
        return n

    def policy(goal, state):
        n = int(goal)
        return Intent({"slow"}, {"n": n}) if state.step_count == 0 else Intent({"done"})

    loop = AgentLoop([Tool("slow", {"slow"}, slow, required={"n"}), tool("done")], policy,
                     verify=lambda o: o.tool_name == "done")

    async def all_runs():
        return await asyncio.gather(*(loop.arun(str(n)) for n in range(1000)))

    results = asyncio.run(all_runs())
    assert all(r.reason == "verified_success" for r in results)
    assert [r.state.observations[0].payload for r in results] == list(range(1000))


def test_a_cancelled_arun_raises_cancelled_error():
    started = asyncio.Event()

    async def hang():
        started.set()
        await asyncio.sleep(60)

    loop = scripted_loop([tool("hang", handler=hang)], [intent("hang")])

    async def cancel_it():
        task = asyncio.create_task(loop.arun("goal"))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(asyncio.wait_for(cancel_it(), timeout=10))


def test_async_user_stages_callbacks_and_approvers_are_awaited():
    from pathlib import Path

    from forge import TransitionCallbacks

    entered = []

    async def on_enter(event):
        await asyncio.sleep(0)
        entered.append(event.model.state)

    async def check(run):
        await asyncio.sleep(0)
        return "within"

    async def approve(request):
        return True

    budget = Stage(check, {"within", "over"}, guards={"within_budget": "within", "over_budget": "over"},
                   stops_in={"over_budget": "budget_exceeded"})
    budgeted = Path(__file__).parent / "definitions" / "budgeted.toml"
    loop = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True, definition=budgeted,
                         stages={"check_budget": budget},
                         hooks=Hooks(callbacks=TransitionCallbacks.of(on_enter={"verify": on_enter})))
    assert asyncio.run(loop.arun("goal")).reason == "verified_success"
    assert entered == ["verify"]
    with pytest.raises(AsyncNotSupported, match="stage 'check_budget'"):
        loop.run("goal")
    approval = scripted_loop([tool("w", side_effect=True)], [intent("w")], verify=lambda o: True,
                             definition="approval", approver=approve)
    assert asyncio.run(approval.arun("goal")).reason == "verified_success"


def test_an_async_callback_under_run_fails_the_run_naming_it():
    from forge import TransitionCallbacks

    async def on_enter(event):
        return None

    loop = scripted_loop([tool("a")], [intent("a")], verify=lambda o: True,
                         hooks=Hooks(callbacks=TransitionCallbacks.of(on_enter={"verify": on_enter})))
    result = loop.run("goal")
    assert result.reason == "fatal_error" and isinstance(result.error, AsyncNotSupported)
    assert result.trace[-1].detail["failed"].startswith("on_enter verify")


def test_an_async_run_without_a_sleep_of_its_own_waits_with_asyncio_sleep(monkeypatch):
    waits = []
    real_sleep = asyncio.sleep

    async def counted(seconds, *args):
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", counted)
    attempts = Recorder(TransientToolError("503", retry_after=0.25), "ok")
    loop = scripted_loop([tool("a", handler=attempts)], [intent("a")], verify=lambda o: True)
    result = asyncio.run(loop.arun("goal"))
    assert result.reason == "verified_success" and result.retries == 1
    assert 0.25 in waits


def test_an_async_run_tells_observers_of_each_tool_attempt():
    from forge.observe import LoopObserver

    attempts = []

    class Attempts(LoopObserver):
        def tool_attempt(self, run, attempt):
            attempts.append(attempt)

    loop = scripted_loop([tool("a", handler=Recorder(TransientToolError("503"), "ok"))], [intent("a")],
                         verify=lambda o: True, retry=Retry(base_delay=0.0), clocks=Clocks(async_sleep=_no_wait))
    result = asyncio.run(loop.arun("goal", observers=[Attempts()]))
    assert result.reason == "verified_success" and len(attempts) == 2


async def _no_wait(seconds):
    return None
