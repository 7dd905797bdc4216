"""The loop as a state machine: definition (data) → stages (callbacks) → engine → trace.

`loader` loads a definition (`forge.records.definition`, the machine as data) with the
stages it names; `catalog` and `stages` are the stage-module calls a definition may refer
to; `engine` is the only module that touches `transitions`; `run` holds one run's mutable
context and `start` what a run is started from; `performers` make a run's calls to the
world (live, replaying, forking); `child` runs a loop as another loop's tool. What all this
reads and leaves behind — traces, journals, calls, answers, usage — is `forge.records`,
below it.
"""
