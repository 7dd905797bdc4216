"""The agent protocols forge speaks, each on its own package (extras): AG-UI, the event
stream agent front ends read (`forge.protocols.ag_ui`, extra `[ag-ui]`), and A2A, how agents
call agents (`forge.protocols.a2a`, extra `[a2a]`). Each maps forge's
own stream (`forge.events`) onto the protocol's types; nothing of a run is kept here that
the run does not keep itself.
"""
