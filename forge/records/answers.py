"""What a run waiting for a person waits for (`Waiting`), and the answers that continue it
(`Answer`).

A run that reaches a needs-input state (`clarification_required`, `capability_gap`,
`approval_required`, `input_required`, a definition's own) asks its performer for an answer
(`forge.machine.asking`); a durable run that finds a call in doubt after a crash asks in
`in_doubt`. `Waiting` says what it needs and an `Answer` gives it; both are plain JSON-able
values, so any process (another worker, `forge runs resume`, `forge ui`) can read the
question and answer it, and the answer is a call of the run's journal like any other.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from forge.errors import UsageError

__all__ = ["ANSWER_KINDS", "Answer", "AnswerRefused", "Waiting", "WAITING_STATES", "form_reply", "json_text", "read_answer"]

WAITING_STATES = ("clarification_required", "capability_gap", "approval_required", "input_required", "in_doubt")
ANSWER_KINDS = ("approve", "reject", "tool", "add_tool", "text", "did_run", "run_again")


class AnswerRefused(UsageError):
    """An answer that does not fit what the run waits for (another call's fingerprint, a
    tool the loop does not have, a run that is not waiting); nothing was sent."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """What a waiting run needs: `state` (one of WAITING_STATES, or a definition's own
    needs-input state), the `tool` and
    `arguments` of the call in question, the call's `fingerprint` (approvals are bound to
    it), the tools that `tied` for a clarification or the `capabilities` no tool offers."""

    state: str
    tool: str | None = None
    arguments: Mapping[str, Any] = field(default_factory=dict)
    fingerprint: str | None = None
    tied: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()
    key: str | None = None
    asked: int = 0
    """Which of the run's questions this is (1, 2, …): an answer is bound to it, so an answer
    meant for one question never answers the next."""
    prompt: str | None = None
    """The policy's own question to the user (`forge.Ask`), when the run waits in
    `input_required`."""
    deadline: float | None = None
    """When the wait ends (seconds since the epoch) and the state's timeout edge is taken,
    for a state with a `timeout`; None: it waits until answered."""
    contract: Mapping[str, Any] | None = None
    """The waiting call's tool's contract (`required`, `optional`, `schema`), so that any
    process can check edited arguments before it sends them."""
    run: str | None = None
    """The child run that waits (its path, `PARENT/research.2`), when a run's question is a
    child run's (`AgentLoop.as_tool`), asked of the parent's person; None: the run's own."""
    server: str | None = None
    """The MCP server that asks (elicitation) in the middle of the run's call of its `tool`
    (`forge.mcp`): its question is the `prompt`, the form it asks for is the contract's
    `schema`, and the reply goes back to the server; None: the run's own question."""

    @property
    def identity(self) -> dict[str, Any]:
        """What the question is, as the journal's answer call is known by it: everything but
        its number among the run's questions and its deadline (a moment, which a replay or a
        recovery does not make again)."""
        identity = {"state": self.state, "tool": self.tool, "arguments": dict(self.arguments),
                    "fingerprint": self.fingerprint, "tied": list(self.tied), "capabilities": list(self.capabilities),
                    "prompt": self.prompt}
        if self.server is not None:  # only then: the identities journals stored before it stay as they were
            identity["server"] = self.server
        return identity

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "tool": self.tool, "arguments": dict(self.arguments),
                "fingerprint": self.fingerprint, "tied": list(self.tied), "capabilities": list(self.capabilities),
                "key": self.key, "asked": self.asked, "prompt": self.prompt, "deadline": self.deadline,
                "contract": None if self.contract is None else dict(self.contract), "run": self.run,
                "server": self.server}

    def shown(self) -> dict[str, Any]:
        """What the run waits for as other programs are shown it (`forge ui`'s API, a
        stream's `waiting` event): `to_json`, and the question in words (`asks`)."""
        return {**self.to_json(), "question": self.asks, "answers": [dict(choice) for choice in self.choices()]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Waiting:
        return cls(str(data["state"]), data.get("tool"), dict(data.get("arguments") or {}), data.get("fingerprint"),
                   tuple(data.get("tied") or ()), tuple(data.get("capabilities") or ()), data.get("key"),
                   int(data.get("asked") or 0), data.get("prompt"), data.get("deadline"), data.get("contract"),
                   data.get("run"), data.get("server"))

    @property
    def asks(self) -> str:
        """What a person is asked, in words, in one line (how to answer it left to where it is
        asked: a page's buttons, `question`'s hints for code); a child run's question says
        which child asks."""
        return self._by_child(self._asks())

    def _by_child(self, text: str) -> str:
        if self.server is not None:
            text = f"MCP server {self.server!r} asks, in its {self.tool}: {text}"
        return text if self.run is None else f"child run {self.run} asks: {text}"

    def _asks(self) -> str:
        call = f"{self.tool}({json.dumps(dict(self.arguments), default=str)})" if self.tool else ""
        if self.state == "input_required":
            return str(self.prompt)
        if self.state == "clarification_required":
            return f"which tool should run: {' or '.join(self.tied)}?"
        if self.state == "capability_gap":
            return f"no tool can do {self.tool or ', '.join(self.capabilities)}: add one, or name another"
        if self.state == "approval_required":
            return f"may it call {call}?"
        if self.state == "in_doubt":
            return f"{call} was running when the process died: did it run?"
        return f"the run waits in {self.state}" + (f" about {call}" if call else "")

    @property
    def question(self) -> str:
        """The question a person is asked, in one line, with how code answers it (a child
        run's naming the child)."""
        return self._by_child(self._question())

    def _question(self) -> str:
        if self.server is not None:
            fields = ", ".join(_form_fields(self))
            return (f"{self.prompt} (answer: Answer.text(REPLY), REPLY the form's fields as a JSON object ({fields}), "
                    f"or one field's value alone; Answer.reject({self.fingerprint}) declines)")
        if self.state == "input_required":
            return f"{self.prompt} (answer: Answer.text(REPLY))"
        if self.state == "clarification_required":
            return f"which tool should run? {' or '.join(self.tied)} (answer: Answer.tool(NAME))"
        if self.state == "capability_gap":
            wanted = self.tool or ", ".join(self.capabilities)
            return f"no tool for {wanted}: add one (Answer.add_tool(NAME)) or name another (Answer.tool(NAME))"
        if self.state == "approval_required":
            return (f"approve {self.tool} {dict(self.arguments)} (fingerprint {self.fingerprint})? "
                    "(Answer.approve(FINGERPRINT) or Answer.reject(FINGERPRINT))")
        if self.state == "in_doubt":
            return (f"{self.tool} {dict(self.arguments)} was running when the process died (key {self.key}): did "
                    "it run? (Answer.did_run(RESULT) or Answer.run_again())")
        about = f" about {self.tool} {dict(self.arguments)}" if self.tool else ""
        return f"the run waits in {self.state}{about}: answer with {' or '.join(self.answers)}"

    def commands(self, run_id: str, db: str | None = None) -> tuple[str, ...]:
        """The command lines that answer this question from a terminal, one per answer that
        fits (`forge runs resume RUN --approve FP`, one `--tool NAME` per tied tool), with
        `--db DB` when given: what the command line prints for a person, not Python."""
        import shlex

        base = f"forge runs resume {shlex.quote(run_id)}" + (f" --db {shlex.quote(db)}" if db else "")
        to_fill = {"tool": "NAME", "add_tool": "NAME", "did_run": "JSON", "text": "REPLY", "run_again": ""}

        def given(kind: str, value: Any) -> str:
            shown = to_fill.get(kind, "VALUE") if value is None else shlex.quote(str(value))
            return f"{base} --{kind.replace('_', '-')}" + (f" {shown}" if shown else "")

        return tuple(given(choice["kind"], choice["value"]) for choice in self.choices())

    def choices(self) -> tuple[Mapping[str, Any], ...]:
        """The answers that fit, as programs are shown them: `{"kind", "value"}` each, the
        value given where the question fixes it (the fingerprint to approve or reject, each
        tied tool's name) and None where a person supplies it (a reply, a tool's name, what
        the call returned), or where none is needed (`run_again`)."""
        fixed: list[Mapping[str, Any]] = []
        for kind in self.answers:
            if kind == "tool" and self.tied:
                fixed += [{"kind": "tool", "value": name} for name in self.tied]
            else:
                fixed.append({"kind": kind, "value": self.fingerprint if kind in ("approve", "reject") else None})
        return tuple(fixed)

    @property
    def answers(self) -> tuple[str, ...]:
        """The kinds of answer that fit: the built-in states' own; for a definition's own
        needs-input state, text (the next turn's goal), and when it waits on a call, a tool
        to run it with, or (its fingerprint) an approval or a rejection."""
        if self.server is not None:  # the reply the server asked for, or declining it (its fingerprint)
            return ("text", "reject")
        fixed = {"clarification_required": ("tool",), "capability_gap": ("tool", "add_tool"),
                 "approval_required": ("approve", "reject"), "in_doubt": ("did_run", "run_again"),
                 "input_required": ("text",)}.get(self.state)
        if fixed is not None:
            return fixed
        return ("text", *(("tool",) if self.tool else ()), *(("approve", "reject") if self.fingerprint else ()))


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer to a waiting run. Make one with the class methods; `kind` and `value` are
    what is stored."""

    kind: str
    value: Any = None
    question: int = 0
    """The question it answers (`Waiting.asked`), set by `resume` from what the run waits for."""
    arguments: Mapping[str, Any] | None = None
    """An approval's edited arguments: the call runs with these instead (see `approve`)."""

    @classmethod
    def tool(cls, name: str) -> Answer:
        """Run the waiting call with this tool (a clarification, or a capability gap)."""
        return cls("tool", name)

    @classmethod
    def add_tool(cls, name: str) -> Answer:
        """Give the run this tool, one of the durable loop's `extra_tools` (a capability gap)."""
        return cls("add_tool", name)

    @classmethod
    def approve(cls, fingerprint: str, arguments: Mapping[str, Any] | None = None) -> Answer:
        """Approve the waiting call whose fingerprint this is; it runs next. With
        `arguments`, approve it edited: it runs with these arguments instead, once, under
        the idempotency key of the edited call, and the trace records it as edited, with the
        original arguments. They are checked against the tool's contract before the answer
        is sent.

        Raises:
            AnswerRefused: `arguments` is not a mapping of names to values.
        """
        if arguments is not None:
            if not isinstance(arguments, Mapping) or not all(isinstance(k, str) for k in arguments):
                raise AnswerRefused(f"edited arguments must be a mapping of argument names to values, got "
                                    f"{arguments!r:.200}")
            arguments = dict(arguments)
        return cls("approve", fingerprint, arguments=arguments)

    @classmethod
    def reject(cls, fingerprint: str) -> Answer:
        """Reject the waiting call; the policy is told and replans."""
        return cls("reject", fingerprint)

    @classmethod
    def text(cls, reply: str) -> Answer:
        """The user's reply to the policy's question (a run waiting in `input_required`): the
        goal of the conversation's next turn.

        Raises:
            AnswerRefused: `reply` is not a non-blank string.
        """
        if not isinstance(reply, str) or not reply.strip():
            raise AnswerRefused(f"a text answer must be a non-blank string, got {reply!r:.100}")
        return cls("text", reply)

    @classmethod
    def did_run(cls, result: Any = None) -> Answer:
        """The call in doubt did run, and returned `result`: it is not called again."""
        return cls("did_run", result)

    @classmethod
    def run_again(cls) -> Answer:
        """The call in doubt did not run (or may safely run again): call it again."""
        return cls("run_again")

    def to_json(self) -> dict[str, Any]:
        data = {"kind": self.kind, "value": self.value, "question": self.question}
        if self.arguments is not None:
            data["arguments"] = dict(self.arguments)
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Answer:
        return cls(str(data["kind"]), data.get("value"), int(data.get("question") or 0), data.get("arguments"))

    def to(self, waiting: Waiting) -> Answer:
        """This answer, bound to the question `waiting` asks."""
        return Answer(self.kind, self.value, waiting.asked, self.arguments)

    def check(self, waiting: Waiting, tools: set[str], extra_tools: set[str]) -> None:
        """Refuse an answer that does not fit `waiting`: another question's (bound to an
        earlier one), another kind, another call's fingerprint, a tool the loop lacks.

        Raises:
            AnswerRefused: naming what the run waits for and what was wrong.
        """
        if self.question and waiting.asked and self.question != waiting.asked:
            raise AnswerRefused(f"that answer was for question {self.question}; the run no longer waits for it "
                                f"(it waits on question {waiting.asked}: {waiting.question})")
        allowed = waiting.answers
        if self.kind not in allowed:
            raise AnswerRefused(f"the run waits in {waiting.state}; answer with {' or '.join(allowed)}, not {self.kind}")
        if self.kind == "text" and (not isinstance(self.value, str) or not self.value.strip()):
            raise AnswerRefused(f"a text answer must be a non-blank string, got {self.value!r:.100}")
        if self.kind == "text" and waiting.server is not None:
            form_reply(waiting, self.value)
        if self.kind == "tool" and self.value not in tools | extra_tools:
            raise AnswerRefused(f"the loop has no tool named {self.value!r}; its tools are {', '.join(sorted(tools))}")
        if self.kind == "tool" and waiting.tied and self.value not in waiting.tied:
            raise AnswerRefused(f"{self.value!r} is not one of the tools that tied: {', '.join(waiting.tied)}")
        if self.kind == "add_tool" and self.value not in extra_tools:
            known = ", ".join(sorted(extra_tools)) or "none"
            raise AnswerRefused(f"{self.value!r} is not one of the durable loop's extra_tools ({known})")
        if self.kind in ("approve", "reject") and self.value != waiting.fingerprint:
            raise AnswerRefused(f"the run waits for an approval of {waiting.tool} with fingerprint "
                                f"{waiting.fingerprint}, not {self.value!r}: an approval is bound to the exact call")
        if self.arguments is not None:
            self._check_edit(waiting)

    def _check_edit(self, waiting: Waiting) -> None:
        """Refuse edited arguments the waiting call's tool would refuse (its contract), or
        edited arguments on anything but an approval."""
        from forge.agent.execution import ArgumentContractError, ToolContract, check_arguments

        if self.kind != "approve":
            raise AnswerRefused("only an approval carries edited arguments")
        if waiting.contract is None or waiting.tool is None:
            raise AnswerRefused(f"run waits on {waiting.tool}, whose contract it did not store: it cannot check "
                                "edited arguments; approve or reject the call as it is")
        contract = ToolContract(waiting.tool, frozenset(waiting.contract.get("required") or ()), _no_handler,
                                frozenset(waiting.contract.get("optional") or ()), waiting.contract.get("schema"))
        try:
            check_arguments(contract, self.arguments or {})
        except ArgumentContractError as error:
            raise AnswerRefused(f"the edited arguments break {waiting.tool}'s contract: {error}; nothing was "
                                "sent") from None


def form_reply(waiting: Waiting, text: str) -> dict[str, Any]:
    """What an MCP server that asked `waiting` (elicitation) is sent for the text reply
    `text`: the form's fields, from a JSON object of them, or, for a form of one field, from
    that field's value alone ("42", "yes", "Oslo"), each of the type the form says.

    Raises:
        AnswerRefused: the reply is not the form's fields (a field missing or unknown, a
            value of another type or outside its choices), naming which.
    """
    schema = (waiting.contract or {}).get("schema") or {}
    fields: Mapping[str, Any] = schema.get("properties") or {}
    stripped = text.strip()
    if stripped.startswith("{"):
        try:
            given = json_text(stripped, "the reply to the form")
        except UsageError as unread:
            raise AnswerRefused(str(unread)) from None
    elif len(fields) == 1:
        given = {next(iter(fields)): stripped}
    else:
        raise AnswerRefused(f"the server asks for {len(fields)} fields ({', '.join(_form_fields(waiting))}): reply "
                            "with a JSON object of them")
    unknown = sorted(set(given) - set(fields))
    if unknown:
        raise AnswerRefused(f"the form has no field {', '.join(map(repr, unknown))}; its fields are "
                            f"{', '.join(_form_fields(waiting))}")
    missing = [name for name in schema.get("required") or () if name not in given]
    if missing:
        raise AnswerRefused(f"the reply leaves out the form's required {', '.join(map(repr, missing))}")
    return {name: _field_value(name, fields[name], value) for name, value in given.items()}


def _form_fields(waiting: Waiting) -> list[str]:
    fields = ((waiting.contract or {}).get("schema") or {}).get("properties") or {}
    return [f"{name}: {field.get('type', 'string')}" for name, field in fields.items()]


_TRUE, _FALSE = frozenset({"true", "yes", "y", "1"}), frozenset({"false", "no", "n", "0"})


def _field_value(name: str, field: Mapping[str, Any], value: Any) -> Any:
    """`value` (as given, or as text) as the form's field `name` takes it.

    Raises:
        AnswerRefused: it is not of the field's type, or not one of its choices."""
    kind = field.get("type", "string")
    made: Any = value
    if isinstance(value, str) and kind in ("integer", "number", "boolean"):
        text = value.strip().lower()
        try:
            made = int(text) if kind == "integer" else float(text) if kind == "number" else \
                True if text in _TRUE else False if text in _FALSE else value
        except ValueError:
            made = value
    fits = {"string": lambda v: isinstance(v, str), "boolean": lambda v: isinstance(v, bool),
            "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
            "array": lambda v: isinstance(v, list) and all(isinstance(item, str) for item in v)}.get(kind)
    if fits is not None and not fits(made):
        raise AnswerRefused(f"the form's field {name!r} takes a {kind}, not {value!r:.100}")
    choices = field.get("enum") or (field.get("items") or {}).get("enum")
    chosen = made if isinstance(made, list) else [made]
    if choices and any(item not in choices for item in chosen):
        raise AnswerRefused(f"the form's field {name!r} takes one of {', '.join(map(str, choices))}, not {value!r:.100}")
    return made


def _no_handler(**arguments: Any) -> None:
    """A contract's handler, never called: edited arguments are only checked."""


def read_answer(kind: Any, value: Any = None, arguments: Any = None, *, question: Any = None, as_text: bool = False,
                names: Mapping[str, str] | None = None) -> Answer:
    """The one reader of an answer given from outside Python, as a kind and a value:
    `forge runs resume`'s flags, a `forge ui` form, the JSON API's body. `arguments` are an
    approval's edited arguments: a JSON object, or its text ('' or None: none). With
    `as_text` (a command line, a form), `did_run`'s value is the call's result as JSON text
    ('': none); otherwise (a JSON body) it is the result itself. `question` binds the
    answer to the question it answers: None leaves it unbound (`resume` binds it to what
    the run asks), anything else must be a whole number of 1 or more, in digits or not.
    `names` say what a refusal calls the `value` and the `arguments` (a command line
    names its flags); by default "the call's result" and "the edited arguments".

    Raises:
        AnswerRefused: a kind forge does not know, a value that does not fit its kind,
            arguments with another kind than approve or that are not an object, or a
            question that is not a number of 1 or more.
        ValueError: (a UsageError) JSON text that cannot be read, naming which.
    """
    said = {"value": "the call's result", "arguments": "the edited arguments", **(names or {})}
    made = _answer_of_kind(str(kind or ""), value, as_text, said["value"])
    if isinstance(arguments, str):
        arguments = json_text(arguments, said["arguments"]) if arguments.strip() else None
    if arguments is not None:
        if made.kind != "approve":
            raise AnswerRefused("only an approval carries edited arguments")
        made = Answer.approve(made.value, arguments=arguments)
    if question is None:
        return made
    number = _whole(question)
    if number is None or number < 1:  # 0 would bind the answer to whatever the run asks when it arrives
        raise AnswerRefused(f"the answer does not say which question it answers (its 'question', a number of 1 or "
                            f"more, got {question!r:.40}): answer what the run asks now")
    return Answer(made.kind, made.value, number, made.arguments)


def _answer_of_kind(kind: str, value: Any, as_text: bool, result_is: str) -> Answer:
    if kind == "text":  # a reply as written
        return Answer.text(value)
    if isinstance(value, str):
        value = value.strip()
    if kind == "did_run":
        if as_text and isinstance(value, str):
            value = json_text(value, result_is) if value else None
        return Answer.did_run(value)
    if kind == "run_again":
        return Answer.run_again()
    if kind in ("approve", "reject", "tool", "add_tool") and isinstance(value, str) and value:
        return Answer(kind, value)
    if kind not in ANSWER_KINDS:
        raise AnswerRefused(f"not an answer forge knows: {kind!r} (the kinds are {', '.join(ANSWER_KINDS)})")
    wanted = "fingerprint" if kind in ("approve", "reject") else "tool name"
    raise AnswerRefused(f"an answer of kind {kind!r} takes a non-blank {wanted}, got {value!r:.100}")


def _whole(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value))
    except ValueError:
        return None


def json_text(text: str, what: str) -> Any:
    """`text` read as JSON.

    Raises:
        ValueError: (a UsageError) it is not JSON, or it nests deeper than Python can read;
            the message names `what` and where it went wrong.
    """
    try:
        return json.loads(text)
    except ValueError as error:
        raise UsageError(f"{what} is not JSON: {error}") from None
    except RecursionError:
        raise UsageError(f"{what} nests too deeply to read ({len(text):,} characters)") from None
