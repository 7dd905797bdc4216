"""Typed answers: the shape a loop's final answer must have (`AgentLoop(..., output=...)`).

A policy's `Finish` is checked against the loop's `Output` before `verify` sees it: a valid
answer becomes the typed value (`result.answer` is a `Weather`, not a dict), an invalid one
is recorded as a `retryable_error` observation of the pseudo-tool `finish` whose payload is
`AnswerInvalid` (naming every path the shape refuses), and the policy replans; the step
budget and the repeat limit bound how often (a definition's `answer_invalid` edge, drawn
and checked as any other). `ChatPolicy` asks the model for the shape (`forge.models.chat`).

The shape is given as a pydantic model, a dataclass (or any type pydantic validates:
`list[str]`, `int`), checked by pydantic; or as a JSON Schema (a mapping), checked by
jsonschema, the typed value then being the JSON value itself.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from forge.agent.execution import SchemaViolation, schema_validator, schema_violations, value_path
from forge.bounded import TooLarge, checked, loads
from forge.errors import ForgeError, UsageError

__all__ = ["ANSWER_FIELD", "AnswerInvalid", "Output"]

ANSWER_FIELD = "answer"
"""The one property a shape that is not a JSON object is wrapped in when it is asked of a
model (structured output and a tool's parameters must be objects)."""


class AnswerInvalid(ForgeError, ValueError):
    """The policy's final answer does not have the loop's output shape. `answer` is what was
    given; `violations` name each path refused (`(answer)` for the whole value)."""

    def __init__(self, shape: str, answer: Any, violations: tuple[SchemaViolation, ...]) -> None:
        listed = "; ".join(f"{v.path}: {v.message}" for v in violations) or "it is not valid"
        super().__init__(f"the answer is not a valid {shape}: {listed}")
        self.shape, self.answer, self.violations = shape, answer, violations


@dataclass(frozen=True, slots=True, eq=False)
class Output:
    """The shape of a loop's answer: `name` (what a model is told it is), its JSON
    `schema`, and whether the schema is wrapped in an object of one property `answer` when
    asked of a model (`wrapped`: the shape is not an object). Made with `Output.of`."""

    name: str
    schema: Mapping[str, Any]
    wrapped: bool
    _check: Callable[[Any], Any] = field(repr=False)

    @classmethod
    def of(cls, shape: Any) -> Output:
        """The output of `shape`: an `Output` as it is, a pydantic model, a dataclass or
        another type pydantic validates, or a JSON Schema mapping.

        Raises:
            ValueError: `shape` is none of those, or its JSON Schema is not valid.
            ImportError: pydantic (for a type) or jsonschema (for a schema) is not
                installed: the `schema` extra.
        """
        if isinstance(shape, Output):
            return shape
        if isinstance(shape, Mapping):
            return _of_schema(shape)
        if isinstance(shape, type) or _is_generic(shape):
            return _of_type(shape)
        raise UsageError(f"output must be a pydantic model, a dataclass, a type or a JSON Schema (a mapping), "
                         f"got {shape!r:.200}")

    def validated(self, answer: Any) -> Any:
        """`answer` as the typed value, JSON text read first (a model's answer is text).

        Raises:
            AnswerInvalid: the answer does not have this shape, or nests deeper or is
                longer than forge reads a value (`forge.bounded`).
        """
        try:
            if isinstance(answer, str) and self.schema.get("type") != "string":
                with contextlib.suppress(json.JSONDecodeError):  # not JSON: refused below as what it is, text
                    answer = loads(answer, "the answer")
            checked(answer, "the answer")
        except TooLarge as too_large:  # kept as a note: the value itself is too deep to show, store or compare
            raise AnswerInvalid(self.name, f"<{too_large}>", (SchemaViolation("(answer)", too_large.why),)) from None
        return self._check(answer)

    def for_model(self) -> dict[str, Any]:
        """The JSON Schema a model is asked for: an object (the shape, or `{answer: shape}`)."""
        if not self.wrapped:
            return dict(self.schema)
        defs = self.schema.get("$defs")
        inner = {k: v for k, v in self.schema.items() if k != "$defs"}
        made: dict[str, Any] = {"type": "object", "properties": {ANSWER_FIELD: inner}, "required": [ANSWER_FIELD],
                                "additionalProperties": False}
        if defs:
            made["$defs"] = defs
        return made

    def from_model(self, value: Any) -> Any:
        """What a model sent for `for_model()`'s schema, unwrapped to the answer itself."""
        if self.wrapped and isinstance(value, Mapping) and set(value) == {ANSWER_FIELD}:
            return value[ANSWER_FIELD]
        return value


def _is_generic(shape: Any) -> bool:
    """`list[str]`, `int | None`, `Literal[...]`: a type expression that is not a class."""
    return hasattr(shape, "__origin__") or type(shape).__name__ in ("UnionType", "_LiteralGenericAlias")


def _of_type(shape: Any) -> Output:
    try:
        import pydantic
    except ImportError as missing:
        raise ImportError("output= as a type is validated by pydantic: install forge with its schema extra "
                          "(pip install 'forge-fsm[schema]')") from missing
    name = getattr(shape, "__name__", None) or str(shape)
    try:
        adapter = pydantic.TypeAdapter(shape)
        schema = adapter.json_schema()
    except (pydantic.PydanticSchemaGenerationError, pydantic.errors.PydanticInvalidForJsonSchema,
            pydantic.PydanticUserError) as error:
        raise UsageError(f"output {name}: it has no JSON Schema: {error}") from None
    schema.pop("title", None)
    if dataclasses.is_dataclass(shape) or (isinstance(shape, type) and issubclass(shape, pydantic.BaseModel)):
        schema.setdefault("description", (shape.__doc__ or "").strip() or None)
        if schema["description"] is None:
            del schema["description"]

    def check(answer: Any) -> Any:
        try:
            return adapter.validate_python(answer)
        except pydantic.ValidationError as error:
            violations = tuple(SchemaViolation(value_path(e["loc"], "(answer)"), e["msg"]) for e in error.errors())
            raise AnswerInvalid(name, answer, violations) from None

    return Output(name, schema, schema.get("type") != "object", check)


def _of_schema(schema: Mapping[str, Any]) -> Output:
    validator = schema_validator("output", schema)
    name = str(schema.get("title") or "answer")

    def check(answer: Any) -> Any:
        violations = schema_violations(validator, answer, "(answer)", "the output's schema")
        if violations:
            raise AnswerInvalid(name, answer, violations)
        return answer

    return Output(name, dict(schema), schema.get("type") != "object", check)
