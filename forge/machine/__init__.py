"""The loop as a state machine: definition (data) → stages (callbacks) → engine → trace.

`definition` reads and validates `machines/*.toml`; `stages` names the stage-module calls a
definition may refer to; `engine` is the only module that touches `transitions`; `run`
holds one run's mutable context; `trace` is the record every fired transition leaves.
"""
