"""The model policies (what their calls cost is `forge.records.usage` and `.pricing`).

- `chat.py`: `ChatPolicy`, any chat-completions endpoint through the `openai` client;
- one module per provider that speaks its own API through its official SDK
  (`anthropic.py`, `gemini.py`, `responses.py`, sharing `native.py`): each is a `ChatPolicy`
  in all it does with the run (tools, parallel calls, typed answers, `Ask`, budgets,
  compaction, streaming, journaled requests); what differs is the wire: the request in the
  provider's form, the reply read from it and kept as the provider sent it, and sent back so;
- `fallback.py`: `FallbackPolicy`, the next model when one fails, of any provider;
- `compaction.py` keeping a conversation within its model's context.

Nothing is imported here: a module is loaded when it is used.
"""
