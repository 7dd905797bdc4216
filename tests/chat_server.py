"""The tests' chat-completions endpoint: forge's own (`forge.chat_server`), imported here
by the name the tests have always used."""

from forge.chat_server import ChatServer, reply

__all__ = ["ChatServer", "reply"]
