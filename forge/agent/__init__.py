"""The seven stage contracts of a trustworthy tool loop.

Each module here encodes one decision and nothing else; none of them knows about the state
machine that composes them (`forge.machine`), so each can be read, tested and reused alone.
"""
