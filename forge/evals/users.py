"""The user's side of a multi-turn case: who says what when a turn of the agent ends.

A turn that ends asking the user (`input_required`) is answered, and a turn that ends with
an answer may be followed by the user's next request. The scripted user (`Conversation.
replies`) says its replies in order until none are left; a model-played user
(`ModelUser`) is asked, with the conversation so far and its persona, for its next message,
and ends the conversation by saying `DONE` (or after `max_replies`). Any other end of a turn
(a failure, a wait for an approval or a clarification) ends the conversation.
"""

from __future__ import annotations

import json
from typing import Any

from forge.evals.cases import Conversation, ModelUser
from forge.evals.tape import ModelTape
from forge.result import LoopResult

__all__ = ["DONE", "UserSide", "said_by_agent"]

DONE = "DONE"
"""What a model-played user says when it has nothing more to ask."""

_USER_SYSTEM = (
    "You are playing a user talking to an AI agent, to test it. Who you are and what you want: {persona}\n"
    "Reply with your next message to the agent only, in the user's words. Answer its questions from what you "
    "know; when what you wanted is done, or the agent cannot do it, reply exactly " + DONE + "."
)


def said_by_agent(turn: LoopResult) -> str | None:
    """What the agent said at the end of `turn` to the user: its question, or its answer
    (as text); None when the turn ended otherwise."""
    if turn.reason == "input_required":
        return turn.question
    if turn.outcome == "success" and turn.answer is not None:
        answer = turn.answer
        return answer if isinstance(answer, str) else json.dumps(answer, default=str)
    return None


class UserSide:
    """One case's user: `next(turns)` is its next message after the turns so far, or None
    when the conversation ends there. `said` is what it said so far (the goal first);
    `used` counts its replies."""

    def __init__(self, conversation: Conversation, tape: ModelTape, client: Any = None) -> None:
        self.conversation, self.tape, self.client = conversation, tape, client
        self.used = 0
        self.said: list[str] = [conversation.goal]

    def next(self, turns: list[LoopResult]) -> str | None:
        """The user's next message after `turns` (see the module).

        Raises:
            TapeMiss, openai.OpenAIError: as `ModelTape.send`, for a model-played user.
        """
        said = said_by_agent(turns[-1])
        if said is None:
            return None
        user = self.conversation.user
        if user is None:
            if self.used >= len(self.conversation.replies):
                return None
            return self._says(self.conversation.replies[self.used])
        if self.used >= user.max_replies:
            return None
        reply = self._played(user, turns)
        return None if reply is None else self._says(reply)

    def _says(self, message: str) -> str:
        self.used += 1
        self.said.append(message)
        return message

    def _played(self, user: ModelUser, turns: list[LoopResult]) -> str | None:
        from forge.models.chat import ChatPolicy

        messages: list[dict[str, Any]] = [{"role": "system", "content": _USER_SYSTEM.format(persona=user.persona)}]
        for own, turn in zip(self.said, turns, strict=False):  # the roles swapped: the model plays the user
            said = said_by_agent(turn)
            messages.append({"role": "assistant", "content": own})
            messages.append({"role": "user", "content": said if said is not None else f"(the agent stopped: {turn.reason})"})
        request = {"model": user.model, "messages": messages}
        reply = self.tape.send("user", ChatPolicy(user.model, client=self.client, ask=False), request)
        content = (reply.get("message") or {}).get("content")
        text = content.strip() if isinstance(content, str) else ""
        return None if not text or text == DONE else text
