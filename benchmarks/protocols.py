"""What the agent protocols cost beside forge's own forms, side by side in one run (issue 52:
at most 1.3x):

- AG-UI: a streamed 20-step run read as AG-UI events (each forge event mapped by
  `AGUIEvents` and encoded by AG-UI's own `EventEncoder`) against the same run read as
  forge's own wire form (`event.to_json()` as JSON), both in process, alternated;
- A2A: a task sent to a loop served over A2A on 127.0.0.1 with `a2a-sdk`'s client, against
  the same loop's run asked of a plain Starlette endpoint on 127.0.0.1 that answers the
  result's JSON: the protocol's request handler, task store and client, beyond HTTP and the
  run itself.

    python benchmarks/protocols.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import socket
import threading
import time
from typing import Any

import uvicorn
from targets import against

from forge import AgentLoop, Finish, Intent, tool
from forge.protocols.a2a import a2a_app
from forge.protocols.ag_ui import AGUIEvents

STEPS = 20


@tool
def look(n: int) -> int:
    """Look at n."""
    return n


def counting(goal: str, state: Any) -> Any:
    done = len(state.observations)
    return Intent.call("look", n=done) if done < STEPS else Finish(f"looked {done} times")


LOOP = AgentLoop([look], counting, lambda o: o.tool_name == "finish", max_steps=STEPS + 2)


async def _own(runs: int) -> float:
    gc.collect()
    started = time.perf_counter()
    for number in range(runs):
        async for event in LOOP.astream("count", run_id=f"own-{number}"):
            json.dumps(event.to_json(), default=str)
    return (time.perf_counter() - started) / runs


async def _ag_ui(runs: int) -> float:
    from ag_ui.encoder import EventEncoder

    encoder = EventEncoder()
    gc.collect()
    started = time.perf_counter()
    for number in range(runs):
        translated = AGUIEvents("t", f"agui-{number}", LOOP.definition)
        for made in translated.started():
            encoder.encode(made)
        async for event in LOOP.astream("count", run_id=f"agui-{number}", observers=[translated.observer()]):
            for made in translated.of(event):
                encoder.encode(made)
    return (time.perf_counter() - started) / runs


def _served(made: Any) -> tuple[Any, str]:
    """The app `made(url)` served on a free port of 127.0.0.1, and its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/"
    server = uvicorn.Server(uvicorn.Config(made(url), host="127.0.0.1", port=port, log_level="warning"))
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    return server, url


def _plain_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def run(request: Request) -> JSONResponse:
        goal = (await request.json())["goal"]
        result = await LOOP.arun(goal)
        return JSONResponse({"reason": result.reason, "answer": result.answer})

    return Starlette(routes=[Route("/", run, methods=["POST"])])


async def _plain(url: str, tasks: int) -> float:
    import httpx

    async with httpx.AsyncClient() as http:
        gc.collect()
        started = time.perf_counter()
        for _ in range(tasks):
            answered = (await http.post(url, json={"goal": "count"})).json()
            assert answered["answer"] == f"looked {STEPS} times", answered
    return (time.perf_counter() - started) / tasks


async def _a2a(url: str, tasks: int) -> float:
    import httpx
    from a2a.client import ClientConfig, create_client
    from a2a.client.card_resolver import A2ACardResolver
    from a2a.helpers.proto_helpers import new_text_message
    from a2a.types import Role, SendMessageRequest

    async with httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, url).get_agent_card()
    client = await create_client(card, ClientConfig(streaming=False))
    try:
        gc.collect()
        started = time.perf_counter()
        for _ in range(tasks):
            request = SendMessageRequest(message=new_text_message("count", role=Role.ROLE_USER))
            task = [each.task async for each in client.send_message(request)][-1]
            assert task.artifacts[0].parts[0].text == f"looked {STEPS} times", task
        return (time.perf_counter() - started) / tasks
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args()
    runs, rounds = (20, 3) if args.quick else (100, 5)
    own, agui = [], []
    for _ in range(rounds):  # alternated, so drift on a shared machine falls on both sides alike
        own.append(asyncio.run(_own(runs)))
        agui.append(asyncio.run(_ag_ui(runs)))
    ratio = min(agui) / min(own)
    print(f"a {STEPS}-step run read as AG-UI events {min(agui) * 1e3:7.2f} ms against forge's own events "
          f"{min(own) * 1e3:7.2f} ms (best of {rounds} x {runs}): {ratio:5.2f}x {against(ratio, 1.3)}")
    plain_server, plain_url = _served(lambda url: _plain_app())
    a2a_server, a2a_url = _served(lambda url: a2a_app(LOOP, url))
    try:
        plain, a2a = [], []
        for _ in range(rounds):
            plain.append(asyncio.run(_plain(plain_url, runs)))
            a2a.append(asyncio.run(_a2a(a2a_url, runs)))
    finally:
        plain_server.should_exit = a2a_server.should_exit = True
    ratio = min(a2a) / min(plain)
    print(f"a {STEPS}-step task over A2A {min(a2a) * 1e3:7.2f} ms against the same run asked over plain HTTP "
          f"{min(plain) * 1e3:7.2f} ms (best of {rounds} x {runs}): {ratio:5.2f}x {against(ratio, 1.3)}")


if __name__ == "__main__":
    main()
