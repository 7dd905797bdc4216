"""An approver given to a loop whose definition never asks for approvals is refused where
the loop is made, saying which definition to use: before, the side effect ran with nobody
asked."""

import pytest

from forge import AgentLoop, Finish, ScriptedPolicy, Tool
from forge.errors import UsageError


def _refund_tool(log):
    return Tool("refund", {"refund"}, lambda amount: log.append(amount) or "refunded", {"amount"}, side_effect=True)


def test_an_approver_on_a_definition_without_approvals_is_refused_naming_the_definition_to_use():
    log: list[int] = []
    with pytest.raises(UsageError, match=r"definition 'single_agent' never asks for approvals.*definition=\"approval\""):
        AgentLoop([_refund_tool(log)], ScriptedPolicy([Finish("done")]), lambda o: True,
                  approver=lambda request: False)
    assert log == []


def test_an_approver_on_the_approval_definition_is_asked_before_the_side_effect():
    log: list[int] = []
    from forge import Intent

    asked = []
    loop = AgentLoop([_refund_tool(log)], ScriptedPolicy([Intent.call("refund", amount=5), Finish("done")]),
                     lambda o: o.tool_name == "finish", definition="approval",
                     approver=lambda request: asked.append(request.arguments["amount"]) or False)
    loop.run("refund")
    assert asked == [5] and log == []
