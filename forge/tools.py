"""Tools as users declare them: name, capabilities, handler and argument contract.

Declare one from a function (`@tool`, `Tool.from_function`): the name, the arguments, a JSON
Schema of their types (built by pydantic from the type hints) and the description all come
from the function, so nothing is restated. `Tool(...)` spells everything out, optionally with
a JSON Schema of its own.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict, Unpack, overload

from forge.agent.actions import ToolSpec
from forge.agent.execution import ArgumentContractError, SchemaViolation, ToolContract
from forge.errors import UsageError, refuse_unknown

__all__ = ["Tool", "ToolOptions", "tool"]


class ToolOptions(TypedDict, total=False):
    """The options `Tool.from_function` and `@tool(...)` pass on to `Tool(...)` as they are
    (each as `Tool` says; left out, `Tool`'s default): `errors` ("raise"), `is_error`
    (None), `on_crash` ("retry"), `repeatable` (False), `raises` (()) and `inline` (False)."""

    errors: str
    is_error: Callable[[Any], bool] | None
    on_crash: str
    repeatable: bool
    raises: Iterable[type[BaseException]]
    inline: bool


@dataclass(frozen=True, slots=True, init=False)
class Tool:
    """A tool the loop may select and call.

    `capabilities` rank it during selection (`Intent.call(name, ...)` selects it by name
    instead); `required` and `optional` are the handler's argument contract, checked before
    every call, and `schema`, when given, a JSON Schema its arguments must also satisfy
    (without explicit `required`/`optional`, they are read from the schema). A `side_effect`
    tool runs through the idempotency registry, so an identical repeated call returns the
    stored value instead of acting twice. Sets may be given as any iterable of strings; they
    are stored frozen. Calling a Tool calls its handler.

    How a failure reaches the policy: a `ToolError` the handler raises is always a
    `retryable_error` observation with its message (the policy replans); with
    `errors="report"` every exception of this tool is (default `"raise"`: an unexpected
    exception ends the run in `fatal_error`). `is_error(value)`, when given, classifies a
    returned value (`{"error": ...}`) as a `retryable_error` too.

    A `side_effect` tool that is `repeatable` makes each decision to call it a new act:
    the same call decided again runs again (reboot, then reboot again), while a retry of
    one decision, or a crash recovery, still runs it once. `raises` lists the tool's own
    error classes, so a replay from a file rebuilds them as what they were
    (`forge.records.recorded`). Without `capabilities` the tool is selected by name only
    (`Intent.call(name, ...)`). A `schema` that says `integer` gets a whole float as an int
    (5.0 → 5; 5.5 is refused), as a `@tool`'s type hint does.

    Under `arun` (and `astream`, and an async durable run) a plain `def` handler runs in a
    worker thread of a bounded pool (`forge.machine.performers.TOOL_THREADS`), so a slow one
    does not stall the event loop and every other task on it; an `async def` handler is
    awaited. `inline=True` says the handler is CPU-trivial (a lookup, arithmetic) and safe
    to run on the event loop itself: it then skips the thread hop. (A run awaiting a call in
    a thread that is cancelled stops waiting for it; the handler runs on to its end.)

    `on_crash` matters to durable runs (`forge.durable`) only: a call that was running when
    the process died is called again with the same idempotency key (`"retry"`, the
    default: at-least-once, made safe by the key), or, with `"ask"`, the run waits in
    `in_doubt` for a person to say whether it ran.

    Raises:
        ValueError: blank name, a non-callable handler, an argument that is
            both required and optional, a schema that is not valid JSON Schema, `errors`
            other than "raise" or "report", `on_crash` other than "retry" or "ask", a
            `raises` entry that is not an exception class, or `repeatable` without
            `side_effect`.
    """

    name: str
    capabilities: frozenset[str]
    handler: Callable[..., Any]
    required: frozenset[str] = frozenset()
    optional: frozenset[str] = frozenset()
    side_effect: bool = False
    description: str = ""
    schema: Mapping[str, Any] | None = field(default=None, hash=False)
    errors: str = "raise"
    is_error: Callable[[Any], bool] | None = None
    on_crash: str = "retry"
    repeatable: bool = False
    raises: tuple[type[BaseException], ...] = ()
    inline: bool = False
    child: Any = field(default=None, compare=False, repr=False)
    """The loop this tool runs as a child run (`AgentLoop.as_tool`), else None."""
    _contract: ToolContract | None = field(default=None, repr=False, compare=False)

    def __init__(
        self,
        name: str,
        capabilities: Iterable[str] = frozenset(),
        handler: Callable[..., Any] | None = None,
        required: Iterable[str] = frozenset(),
        optional: Iterable[str] = frozenset(),
        side_effect: bool = False,
        *,
        description: str = "",
        schema: Mapping[str, Any] | None = None,
        errors: str = "raise",
        is_error: Callable[[Any], bool] | None = None,
        on_crash: str = "retry",
        repeatable: bool = False,
        raises: Iterable[type[BaseException]] = (),
        inline: bool = False,
    ) -> None:
        object.__setattr__(self, "name", name)
        if handler is None:
            if callable(capabilities):
                raise UsageError(f"Tool({name!r}, {getattr(capabilities, '__name__', capabilities)}): the second argument "
                                 "is the capabilities (a set of strings) and the third the handler; to make a tool "
                                 "from a function, use Tool.from_function(fn) or @tool")
            raise UsageError(f"tool {name!r} needs a handler: Tool(name, capabilities, handler, ...)")
        for field_name, value in (("capabilities", capabilities), ("required", required), ("optional", optional)):
            if isinstance(value, str):
                raise UsageError(f"tool {name!r}: {field_name} must be a set of strings, not a string")
            object.__setattr__(self, field_name, frozenset(value))
        object.__setattr__(self, "handler", handler)
        object.__setattr__(self, "side_effect", bool(side_effect))
        object.__setattr__(self, "description", description)
        object.__setattr__(self, "schema", schema)
        object.__setattr__(self, "errors", errors)
        object.__setattr__(self, "is_error", is_error)
        object.__setattr__(self, "on_crash", on_crash)
        object.__setattr__(self, "repeatable", bool(repeatable))
        object.__setattr__(self, "raises", tuple(raises))
        object.__setattr__(self, "inline", bool(inline))
        object.__setattr__(self, "child", None)
        self._check_options()
        if schema is not None:
            if not isinstance(schema, Mapping):
                raise UsageError(f"tool {self.name!r}: schema must be a JSON Schema object, got {type(schema).__name__}")
            if not self.required and not self.optional:
                properties = schema.get("properties", {})
                object.__setattr__(self, "required", frozenset(schema.get("required", ())))
                object.__setattr__(self, "optional", frozenset(properties) - self.required)
        both = self.required & self.optional
        if both:
            raise UsageError(
                f"tool {self.name!r}: arguments both required and optional: {', '.join(sorted(both))}"
            )
        object.__setattr__(self, "_contract", ToolContract(self.name, self.required, self.handler, self.optional,
                                                           self.schema, _whole_integers(self.schema)))

    def _check_options(self) -> None:
        """Refuse options that do not fit together or are not what they say.

        Raises:
            UsageError: naming the tool and the option."""
        name = self.name
        if not all(isinstance(kind, type) and issubclass(kind, BaseException) for kind in self.raises):
            raise UsageError(f"tool {name!r}: raises must list exception classes, got {list(self.raises)!r}")
        if self.repeatable and not self.side_effect:
            raise UsageError(f"tool {name!r}: repeatable=True says each call is a new side effect; it needs "
                             "side_effect=True (a tool without side effects runs every time anyway)")
        if self.on_crash not in ("retry", "ask"):
            raise UsageError(f"tool {name!r}: on_crash must be 'retry' or 'ask', got {self.on_crash!r}")
        if self.errors not in ("raise", "report"):
            raise UsageError(f"tool {name!r}: errors must be 'raise' or 'report', got {self.errors!r}")
        if self.is_error is not None and not callable(self.is_error):
            raise UsageError(f"tool {name!r}: is_error must be callable as is_error(value) -> bool")
        if not isinstance(name, str) or not name.strip():
            raise UsageError("tool name must be a non-empty string")
        if not callable(self.handler):
            raise UsageError(f"tool {name!r}: handler must be callable")

    @classmethod
    def from_function(cls, function: Callable[..., Any], capabilities: Iterable[str] | None = None,
                      side_effect: bool = False, name: str | None = None, **options: Unpack[ToolOptions]) -> Tool:
        """A tool whose name, arguments, JSON Schema and description come from `function`.

        Parameters without a default are required, the others optional; each one's type hint
        becomes its schema (pydantic builds it: `int`, `str | None`, `Literal[...]`,
        `list[str]`, TypedDicts, dataclasses and models, `Annotated[int, Field(ge=1)]`, …),
        and no other argument is accepted. The description is the docstring's first
        paragraph. `capabilities` default to the tool's name; the `options` (`ToolOptions`)
        are `Tool`'s.

        Raises:
            TypeError: an option `Tool` does not take (named).
            ValueError: `function` takes `*args`, `**kwargs` or positional-only parameters
                (arguments are passed by name), or a type hint has no JSON Schema.
            ImportError: pydantic is not installed (extra `schema`).
        """
        if not callable(function):
            raise UsageError(f"Tool.from_function needs a function, got {function!r}")
        _refuse_unknown(options)
        tool_name: str = name or str(getattr(function, "__name__", ""))
        required, optional, schema, model = _signature_schema(tool_name, function)
        doc = inspect.getdoc(function) or ""
        made = cls(tool_name, capabilities if capabilities is not None else {tool_name}, function,
                   required, optional, side_effect, description=doc.split("\n\n", 1)[0].replace("\n", " "),
                   schema=schema, **options)
        object.__setattr__(made, "_contract", replace(made.contract, convert=_converter(tool_name, model)))
        return made

    @property
    def spec(self) -> ToolSpec:
        """What selection sees."""
        return ToolSpec(self.name, self.capabilities)

    @property
    def contract(self) -> ToolContract:
        """What execution checks (built once, with its compiled schema)."""
        assert self._contract is not None
        return self._contract

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.handler(*args, **kwargs)

    def summary(self) -> str:
        """How forge sees this tool, in a few lines: its name and whether it has side
        effects, its required and optional arguments with their types, its description."""
        properties = (self.schema or {}).get("properties", {})

        def listing(names: frozenset[str]) -> str:
            return ", ".join(f"{n} ({_type_of(properties[n])})" if n in properties else n for n in sorted(names)) or "—"

        lines = [f"{self.name}  {'side effect' if self.side_effect else 'no side effect'}",
                 f"  required: {listing(self.required)}", f"  optional: {listing(self.optional)}"]
        if self.description:
            lines.append(f"  {self.description.splitlines()[0]}")
        return "\n".join(lines)


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...
@overload
def tool(*, capabilities: Iterable[str] | None = None, side_effect: bool = False, name: str | None = None,
         **options: Unpack[ToolOptions]) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(function: Callable[..., Any] | None = None, /, *, capabilities: Iterable[str] | None = None,
         side_effect: bool = False, name: str | None = None,
         **options: Unpack[ToolOptions]) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """`@tool` or `@tool(capabilities=..., side_effect=True, name=..., errors="report")`:
    `Tool.from_function` as a decorator (the `options` are `ToolOptions`). The decorated
    name is the Tool, still callable as the function.

    Raises:
        TypeError: an option `Tool` does not take (named), when `tool(...)` is called.
    """
    if function is not None:
        return Tool.from_function(function)
    _refuse_unknown(options)

    def decorate(inner: Callable[..., Any]) -> Tool:
        return Tool.from_function(inner, capabilities, side_effect, name, **options)

    return decorate



def _refuse_unknown(options: Mapping[str, Any]) -> None:
    """Refuse a keyword of `Tool.from_function` or `@tool(...)` that is not one of theirs.

    Raises:
        WrongType: naming it, and every keyword they take."""
    refuse_unknown(options, ToolOptions, "tool", ("capabilities", "side_effect", "name"))


def _whole_integers(schema: Mapping[str, Any] | None) -> Callable[[Mapping[str, Any]], Mapping[str, Any]] | None:
    """For a `schema=` tool: checked arguments with each whole float the schema says is an
    `integer` made an int (JSON Schema counts 5.0 as an integer and refuses 5.5 before this
    runs), through nested objects and arrays; None when the schema names no integer."""
    if schema is None or "integer" not in repr(schema):
        return None

    def integer_only(part: Mapping[str, Any]) -> bool:
        kind = part.get("type")
        kinds = kind if isinstance(kind, list) else [kind]
        return "integer" in kinds and "number" not in kinds

    def made(value: Any, part: Any) -> Any:
        if not isinstance(part, Mapping):
            return value
        if isinstance(value, float) and value.is_integer() and integer_only(part):
            return int(value)
        if isinstance(value, dict) and isinstance(part.get("properties"), Mapping):
            return {key: made(item, part["properties"].get(key)) for key, item in value.items()}
        if isinstance(value, list) and isinstance(part.get("items"), Mapping):
            return [made(item, part["items"]) for item in value]
        return value

    def convert(arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        converted: Mapping[str, Any] = made(dict(arguments), schema)
        return converted

    return convert


def _converter(name: str, model: Any) -> Callable[[Mapping[str, Any]], Mapping[str, Any]]:
    """Checked arguments made into what the function's hints take, by the pydantic model of
    its signature: a JSON array becomes a tuple where the hint says tuple, a whole float
    (5.0) an int, a date's text a date; a value it cannot convert exactly is refused."""
    import pydantic

    def convert(arguments: Mapping[str, Any]) -> Mapping[str, Any]:
        try:
            made = model.model_validate(dict(arguments))
        except pydantic.ValidationError as error:
            violations = tuple(SchemaViolation(".".join(map(str, e["loc"])) or "(arguments)", e["msg"])
                               for e in error.errors())
            raise ArgumentContractError(name, (), (), violations) from None
        return {key: getattr(made, key) for key in arguments}

    return convert


def _signature_schema(name: str, function: Callable[..., Any]
                      ) -> tuple[frozenset[str], frozenset[str], dict[str, Any], Any]:
    try:
        import pydantic
    except ImportError as missing:
        raise ImportError("Tool.from_function builds schemas with pydantic: install forge with its schema "
                          "extra (pip install 'forge-fsm[schema]')") from missing
    signature = inspect.signature(function)
    try:
        hints = typing.get_type_hints(function, include_extras=True)
    except Exception as error:
        raise UsageError(f"tool {name!r}: its type hints cannot be resolved: {error}") from None
    fields: dict[str, Any] = {}
    required: set[str] = set()
    optional: set[str] = set()
    for parameter in signature.parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD, parameter.POSITIONAL_ONLY):
            raise UsageError(f"tool {name!r}: parameter {parameter} cannot be passed by name; a tool's arguments "
                             "are named, so declare each one")
        default = ... if parameter.default is parameter.empty else parameter.default
        (required if default is ... else optional).add(parameter.name)
        fields[parameter.name] = (hints.get(parameter.name, Any), default)
    try:
        model = pydantic.create_model(f"{name}_arguments", __config__=pydantic.ConfigDict(extra="forbid"), **fields)
        schema = model.model_json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.errors.PydanticInvalidForJsonSchema,
            pydantic.PydanticUserError) as error:
        raise UsageError(f"tool {name!r}: its type hints have no JSON Schema: {error}") from None
    schema.pop("title", None)
    return frozenset(required), frozenset(optional), schema, model


def _type_of(schema: Mapping[str, Any]) -> str:
    """A JSON Schema's type in a few words: `integer`, `array of string`, `one of a, b`."""
    if "enum" in schema:
        return "one of " + ", ".join(str(v) for v in schema["enum"])
    if "$ref" in schema:
        return str(schema["$ref"]).rsplit("/", 1)[-1]
    for union in ("anyOf", "oneOf"):
        if union in schema:
            return " | ".join(_type_of(branch) for branch in schema[union])
    kind = schema.get("type", "any")
    if kind == "array" and isinstance(schema.get("items"), Mapping):
        return f"array of {_type_of(schema['items'])}"
    return " | ".join(kind) if isinstance(kind, list) else str(kind)
