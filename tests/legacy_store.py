"""Makes a runs database the way forge 0.1.0 (main at 83e131b) stored it: with pickle.

    python legacy_store.py DB

It is kept beside the database it made (`tests/data/store-0.1.0.sqlite`, made with this
script at that commit), which the store tests open with today's forge: every run it holds
must read, in a process that has none of the code below on its path (`shop` is made in a
folder of its own, then left), and the run it left waiting must go on. The runs:

- `typed`: finished with a typed answer, an `Order` (a pydantic model of the module `shop`);
- `keyed`: finished; its one call was a keyed side effect (an idempotency record);
- `failed`: ended in `fatal_error`, its tool having raised `shop.OutOfStock`;
- `waiting`: waits for the approval of a keyed side effect (`ship`, item `alpha`);
- `keyed-fork-1`: a fork of `keyed` at transition 1 (journal rows copied by the fork);
- `going-on`: a second turn going on from `keyed`'s state (its input holds a `LoopState`).
"""

from __future__ import annotations

import sys
import tempfile
import textwrap
from pathlib import Path

SHOP = textwrap.dedent('''
    from pydantic import BaseModel


    class Order(BaseModel):
        item: str
        count: int


    class OutOfStock(Exception):
        """The shop has none left."""
''')


def main(db: str) -> int:
    folder = Path(tempfile.mkdtemp())
    (folder / "shop.py").write_text(SHOP)
    sys.path.insert(0, str(folder))
    import shop  # type: ignore[import-not-found]

    from forge import AgentLoop, Finish, Intent, Tool
    from forge.durable import shutdown

    def ship(item: str) -> dict[str, str]:
        return {"shipped": item}

    def broken(item: str) -> str:
        raise shop.OutOfStock(f"no {item} left")

    def policy(goal: str, state: object) -> object:
        observations = state.observations  # type: ignore[attr-defined]
        if not observations or observations[-1].tool_name == "finish":
            tool = "broken" if goal.startswith("break") else "ship"
            return Intent.call(tool, item=goal.split()[-1]).keyed(f"ship-{goal.split()[-1]}")
        if goal.startswith("order"):
            return Finish({"item": goal.split()[-1], "count": 2})
        return Finish(observations[-1].payload)

    tools = [Tool("ship", {"ship"}, ship, required={"item"}, side_effect=True),
             Tool("broken", {"ship"}, broken, required={"item"})]
    plain = AgentLoop(tools, policy, lambda o: o.tool_name == "finish")
    typed = AgentLoop(tools, policy, lambda o: o.tool_name == "finish", output=shop.Order)
    asking = AgentLoop(tools, policy, lambda o: o.tool_name == "finish", definition="approval",
                       approver=lambda request: None)
    durable = plain.durable("plain", db=db)
    typed_durable = typed.durable("typed", db=db)
    asking_durable = asking.durable("asking", db=db)
    print(typed_durable.run("order beta", run_id="typed").answer)
    keyed = durable.run("ship gamma", run_id="keyed")
    print(keyed.status, keyed.reason)
    print(durable.run("break delta", run_id="failed").reason)
    print(asking_durable.run("ship alpha", run_id="waiting").status)
    fork = durable.fork("keyed", at=1)
    print(fork, durable.wait(fork, timeout=60).reason)
    print(durable.run("ship epsilon", run_id="going-on", state=keyed).reason)
    shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
