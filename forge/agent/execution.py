"""Stage 3, execute: argument contracts checked before any handler runs.

Passing undeclared arguments through could hand a tool `sudo=True`; filtering them silently
would hide the caller's mistake. So every violation is refused before the handler is called.
A contract may also carry a JSON Schema of its arguments: then types, enums, array items,
nested objects and formats are checked too (by `jsonschema`, a well-kept validator), after
the missing/unexpected check and still before the handler.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from forge.errors import ForgeError, UsageError

__all__ = ["ArgumentContractError", "ExecutionResult", "SchemaViolation", "ToolContract", "check_arguments", "execute_tool",
           "schema_validator", "schema_violations", "value_path"]


@dataclass(frozen=True, slots=True)
class ToolContract:
    """The arguments a tool's handler accepts: all of `required`, any of `optional`, and,
    when `schema` is given, values that JSON Schema (draft 2020-12) accepts.

    Raises:
        ValueError: `schema` is not a valid JSON Schema (the message says where).
        ImportError: a `schema` is given and `jsonschema` is not installed.
    """

    name: str
    required: frozenset[str]
    handler: Callable[..., Any]
    optional: frozenset[str] = frozenset()
    schema: Mapping[str, Any] | None = None
    convert: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = field(default=None, compare=False)
    """What makes checked arguments into what the handler's signature takes (a `@tool`'s
    JSON array into a tuple where its hint says tuple, 5.0 into 5 for an int); it raises
    ArgumentContractError for a value it cannot convert exactly."""
    _validator: Any = field(default=None, init=False, repr=False, compare=False)
    _accepted: frozenset[str] = field(default=frozenset(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_accepted", self.required | self.optional)
        if self.schema is not None:
            object.__setattr__(self, "_validator", schema_validator(f"tool {self.name!r}", self.schema))

    def violations(self, arguments: Mapping[str, Any]) -> tuple[SchemaViolation, ...]:
        """What `schema` refuses in `arguments`, every failing path once; () without a schema."""
        if self._validator is None:
            return ()
        return schema_violations(self._validator, dict(arguments), "(arguments)", "the tool's schema")


def schema_violations(validator: Any, value: Any, whole: str, schema: str) -> tuple[SchemaViolation, ...]:
    """What `validator` (made by `schema_validator`) refuses in `value`, every failing path
    once, sorted; `whole` names the value itself (`(arguments)`, `(answer)`) and `schema`
    the schema ("the tool's schema")."""
    found: dict[tuple[str, str], SchemaViolation] = {}
    try:
        for error in validator.iter_errors(value):
            for leaf in _specific(error):
                violation = SchemaViolation(value_path(leaf.absolute_path, whole), _message(leaf))
                found.setdefault((violation.path, violation.message), violation)
    except Exception as error:  # a $ref that cannot be resolved: forge never retrieves one
        from referencing.exceptions import Unresolvable

        unresolvable = error if isinstance(error, Unresolvable) else getattr(error, "__cause__", None)
        if not isinstance(unresolvable, Unresolvable) and "Unresolvable" not in type(error).__name__:
            raise
        reference = getattr(unresolvable, "ref", None) or str(error)
        return (SchemaViolation(whole, f"{schema} refers to {reference!r}, which forge does "
                                "not retrieve (only references inside the schema resolve)"),)
    return tuple(sorted(found.values(), key=lambda v: (v.path, v.message)))


@dataclass(frozen=True, slots=True)
class SchemaViolation:
    """One value the schema refuses: `path` names it (`limit`, `tags[1]`, `filter.kind`;
    `(arguments)` for the whole set) and `message` says why, in the validator's words."""

    path: str
    message: str


@dataclass(frozen=True, slots=True)
class ExecutionResult:
    """A handler's return value, tagged with the tool that produced it."""

    tool_name: str
    value: Any


class ArgumentContractError(ForgeError, ValueError):
    """The arguments break the tool's contract; the handler was not called.

    `missing` and `unexpected` are sorted tuples naming every offending argument;
    `violations` lists what the contract's JSON Schema refused (checked only when nothing
    is missing or unexpected).
    """

    def __init__(self, tool_name: str, missing: tuple[str, ...], unexpected: tuple[str, ...],
                 violations: tuple[SchemaViolation, ...] = ()) -> None:
        parts = []
        if missing:
            parts.append(f"missing: {', '.join(missing)}")
        if unexpected:
            parts.append(f"unexpected: {', '.join(unexpected)}")
        parts.extend(f"{v.path}: {v.message}" for v in violations)
        super().__init__(f"arguments for {tool_name} break its contract; {'; '.join(parts)}")
        self.tool_name = tool_name
        self.missing = missing
        self.unexpected = unexpected
        self.violations = violations


def execute_tool(contract: ToolContract, arguments: Mapping[str, Any]) -> ExecutionResult:
    """Call `contract.handler(**arguments)` once the arguments fit the contract.

    Both missing (required - given) and unexpected (given - required - optional) arguments
    are computed before the handler is considered; nothing is ever filtered out. Then, when
    the contract has a schema, every value is checked against it.

    Raises:
        ArgumentContractError: (a ValueError) any argument is missing or unexpected; its
            message names each one ("missing: …", "unexpected: …"); or the schema refuses
            values, each named by its path ("tags[1]: 3 is not of type 'string'").
        Whatever the handler raises, unchanged.
    """
    check_arguments(contract, arguments)
    if contract.convert is not None:
        arguments = contract.convert(arguments)
    return ExecutionResult(contract.name, contract.handler(**arguments))


def check_arguments(contract: ToolContract, arguments: Mapping[str, Any]) -> None:
    """What `execute_tool` checks before it calls the handler, without calling it.

    Raises:
        ArgumentContractError: as `execute_tool`.
    """
    given = arguments.keys()
    if not (contract.required <= given <= contract._accepted):  # the common case costs two subset tests
        names = {key if isinstance(key, str) else repr(key) for key in given}  # a key of 1 is unexpected, not a crash
        missing = tuple(sorted(contract.required - names))
        unexpected = tuple(sorted(names - contract.required - contract.optional))
        raise ArgumentContractError(contract.name, missing, unexpected)
    if contract.schema is not None:
        violations = contract.violations(arguments)
        if violations:
            raise ArgumentContractError(contract.name, (), (), violations)


def schema_validator(owner: str, schema: Mapping[str, Any]) -> Any:
    """A draft 2020-12 validator of `schema` (a Python tuple counts as an array; no `$ref`
    outside the schema is ever retrieved); `owner` ("tool 'x'") is what errors name.

    Raises:
        ValueError: `schema` is not valid JSON Schema (the message says where).
        ImportError: jsonschema is not installed.
    """
    try:
        from jsonschema import Draft202012Validator, exceptions, validators
    except ImportError as missing:
        raise ImportError(f"{owner} has a JSON Schema, and checking it needs jsonschema: "
                          "install forge with its schema extra (pip install 'forge-fsm[schema]')") from missing
    from referencing import Registry

    cls = validators.validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except exceptions.SchemaError as error:
        raise UsageError(f"{owner}: its schema is not valid JSON Schema at "
                         f"{value_path(error.absolute_path, '(schema)')}: {error.message}") from None
    arrays = cls.TYPE_CHECKER.redefine("array", lambda checker, instance: isinstance(instance, (list, tuple)))
    tuples = validators.extend(cls, type_checker=arrays)  # a Python caller's tuple is an array
    # a registry of nothing: a $ref outside the schema is unresolvable, never fetched (the schema's author
    # chooses the address; jsonschema without a registry would still retrieve it)
    return tuples(schema, format_checker=cls.FORMAT_CHECKER, registry=Registry())


def _specific(error: Any) -> list[Any]:
    """For a union the value nearly matched (`list[str] | None` given `["a", 2]`), the
    errors inside the branch it matched deepest, each at its own path; else the error."""
    if not error.context:
        return [error]
    deepest = max(len(branch.relative_path) for branch in error.context)
    if deepest == 0:
        return [error]
    return [branch for branch in error.context if len(branch.relative_path) == deepest]


def _message(error: Any) -> str:
    """The validator's message; for a union (anyOf, oneOf) also why each branch refused."""
    if not error.context:
        return str(error.message)
    branches = "; ".join(sorted({str(branch.message) for branch in error.context}))
    return f"{error.message} ({branches})"


def value_path(parts: Any, whole: str) -> str:
    """Where in a value a validator looked: `tags[1]`, `filter.kind`; `whole` for the value itself."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or whole
