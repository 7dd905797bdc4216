"""The model policies, and what their calls cost.

- `chat.py`: `ChatPolicy`, any chat-completions endpoint through the `openai` client;
- one module per provider that speaks its own API through its official SDK
  (`anthropic.py`, `gemini.py`, `responses.py`, sharing `native.py`): each is a `ChatPolicy`
  in all it does with the run (tools, parallel calls, typed answers, `Ask`, budgets,
  compaction, streaming, journaled requests); what differs is the wire: the request in the
  provider's form, the reply read from it and kept as the provider sent it, and sent back so;
- `fallback.py`: `FallbackPolicy`, the next model when one fails, of any provider;
- `usage.py` tokens per call and the token budget, `pricing.py` what calls cost in money
  and the money budget, `compaction.py` keeping a conversation within its model's context.

Nothing is imported here: a module is loaded when it is used (the machine's stages read
`usage` and `pricing` without loading any model's SDK).
"""
