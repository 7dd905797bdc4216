"""Model policies that speak a provider's own API through its official SDK, one module per
provider (`forge.models.anthropic`). Each is a `forge.llm.ChatPolicy` in all it does with the
run (tools, parallel calls, typed answers, `Ask`, budgets, compaction, streaming, journaled
requests); what differs is the wire: the request in the provider's form, the reply read from
it and kept as the provider sent it, and sent back so.
"""
