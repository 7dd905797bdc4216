import pytest

from forge.agent.execution import (
    ArgumentContractError,
    ExecutionResult,
    ToolContract,
    execute_tool,
)


class Handler:
    def __init__(self):
        self.calls = []

    def __call__(self, **kwargs):
        self.calls.append(kwargs)
        return f"read {kwargs['path']}"


def test_valid_arguments_reach_the_handler_and_are_wrapped():
    handler = Handler()
    contract = ToolContract("read_file", frozenset({"path"}), handler)
    assert execute_tool(contract, {"path": "a.txt"}) == ExecutionResult("read_file", "read a.txt")
    assert handler.calls == [{"path": "a.txt"}]


def test_optional_arguments_are_accepted():
    handler = Handler()
    contract = ToolContract("read_file", frozenset({"path"}), handler, frozenset({"encoding"}))
    execute_tool(contract, {"path": "a.txt", "encoding": "utf-8"})
    assert handler.calls == [{"path": "a.txt", "encoding": "utf-8"}]


def test_sudo_true_is_rejected_before_the_handler_runs():
    handler = Handler()
    contract = ToolContract("read_file", frozenset({"path"}), handler)
    with pytest.raises(ValueError, match="unexpected: sudo"):
        execute_tool(contract, {"path": "a.txt", "sudo": True})
    assert handler.calls == []


def test_missing_argument_is_rejected_before_the_handler_runs():
    handler = Handler()
    contract = ToolContract("write_file", frozenset({"path", "text"}), handler)
    with pytest.raises(ValueError, match="missing: text"):
        execute_tool(contract, {"path": "a.txt"})
    assert handler.calls == []


def test_error_names_every_missing_and_unexpected_argument():
    contract = ToolContract("write_file", frozenset({"path", "text"}), Handler())
    with pytest.raises(ArgumentContractError) as caught:
        execute_tool(contract, {"mode": "w", "sudo": True})
    assert caught.value.missing == ("path", "text")
    assert caught.value.unexpected == ("mode", "sudo")
    assert "missing: path, text" in str(caught.value)
    assert "unexpected: mode, sudo" in str(caught.value)


def test_handler_exceptions_propagate_unchanged():
    def boom(path):
        raise KeyError(path)

    with pytest.raises(KeyError):
        execute_tool(ToolContract("boom", frozenset({"path"}), boom), {"path": "x"})


def test_contract_and_result_are_frozen():
    contract = ToolContract("t", frozenset(), Handler())
    with pytest.raises(AttributeError):
        contract.name = "u"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        ExecutionResult("t", 1).value = 2  # type: ignore[misc]
