"""Under `arun` a plain tool runs in a worker thread (issue 50, item 1): the event loop goes
on while it runs, it sees the caller's context variables, 100 runs each in a slow plain
tool are all in it at once, and a tool that says it is CPU-trivial (`inline=True`) runs on
the event loop's own thread."""

import asyncio
import contextvars
import threading

from forge import AgentLoop, Finish, Intent, Tool

REQUEST = contextvars.ContextVar("request", default="none")


def one_call(tool: Tool) -> AgentLoop:
    return AgentLoop([tool], lambda goal, state: Intent.call(tool.name) if not state.observations else Finish("ok"),
                     lambda o: o.tool_name == "finish")


def test_a_plain_tool_under_arun_runs_off_the_event_loop_which_goes_on_meanwhile():
    released, seen = threading.Event(), {}

    def slow() -> str:
        seen["thread"] = threading.current_thread()
        assert released.wait(30), "the event loop never ran while the tool did"
        return "done"

    async def main():
        run = asyncio.create_task(one_call(Tool("slow", {"slow"}, slow)).arun("go"))
        while "thread" not in seen:
            await asyncio.sleep(0.005)
        released.set()  # set by the event loop while the tool blocks its thread: it would hang inline
        return await run

    result = asyncio.run(main())
    assert result.answer == "ok" and seen["thread"] is not threading.main_thread()
    assert seen["thread"].name.startswith("forge-tool")


def test_a_plain_tool_under_arun_sees_the_callers_context_variables():
    seen = []

    async def main():
        REQUEST.set("req-7")
        return await one_call(Tool("who", {"who"}, lambda: seen.append(REQUEST.get()) or "ok")).arun("go")

    assert asyncio.run(main()).reason == "verified_success" and seen == ["req-7"]


def test_a_hundred_runs_in_a_slow_plain_tool_are_all_in_it_at_once():
    everyone = threading.Barrier(100, timeout=30)  # breaks unless all 100 calls are in the tool together

    def meet() -> int:
        return everyone.wait()

    loop = one_call(Tool("meet", {"meet"}, meet))

    async def main():
        return await asyncio.gather(*(loop.arun("go") for _ in range(100)))

    results = asyncio.run(main())
    assert [result.reason for result in results] == ["verified_success"] * 100
    assert sorted(result.state.observations[0].payload for result in results) == list(range(100))


def test_an_inline_tool_runs_on_the_event_loops_thread():
    seen = []
    loop = one_call(Tool("add", {"add"}, lambda: seen.append(threading.current_thread()) or 2, inline=True))
    assert asyncio.run(loop.arun("go")).reason == "verified_success" and seen == [threading.main_thread()]


def test_a_plain_tool_under_run_runs_on_the_callers_thread():
    seen = []
    loop = one_call(Tool("here", {"here"}, lambda: seen.append(threading.current_thread()) or 1))
    assert loop.run("go").reason == "verified_success" and seen == [threading.main_thread()]
