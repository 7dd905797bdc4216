"""An agent's test that calls no model: a chat policy's run recorded once into a cassette
(cassettes/test_the_agent_answers_from_the_note.jsonl, beside this file) and replayed by
every run since, with no network, no API key and no tool call. forge's pytest plugin gives
the `cassette` fixture; nothing to set up.

    pytest examples/test_notes_agent.py --forge-record=none   # replay only: CI
    pytest examples/test_notes_agent.py --forge-record=all    # record again (needs a model:
                                                              # OPENAI_BASE_URL, OPENAI_API_KEY)
"""

from forge import AgentLoop, Finish, tool
from forge.models.chat import ChatPolicy

NOTES = {"todo.md": "buy milk"}


@tool
def read_note(path: str) -> str:
    """Read a note by its path."""
    return NOTES[path]


def test_the_agent_answers_from_the_note(cassette):
    loop = AgentLoop([read_note], ChatPolicy("gpt-4o-mini", system="You keep notes."),
                     verify=lambda obs: isinstance(obs.payload, Finish) and "milk" in str(obs.payload.answer))
    result = cassette.run(loop, "what is on my todo list?")
    assert result.reason == "verified_success"
    assert [o.payload for o in result.state.observations][:1] == ["buy milk"]
