"""What a run is made of and leaves behind, as values: below the machine that makes them.

- `definition.py` a machine as data (states, transitions, the stage each names), read from
  `machines/*.toml` and checked; `abstract.py` its abstract runs, what `forge check` proves;
- `trace.py` the record each fired transition leaves, and the trace file; `details.py` the
  one reader of what a record's detail says; `tally.py` a run's counts and timings;
- `effects.py` a call to the world as a value (what a stage asks a performer to do);
  `journal.py` every call a run made, in order, with its outcome (what a replay answers
  from); `recorded.py` errors read back from a file; `wire.py` the one tagged JSON form of a
  value at every edge; `columns.py` columns of values kept compactly;
- `answers.py` a person's answer to a waiting run, in each form it arrives in;
  `outcome.py` what a stage returns to the engine;
- `usage.py` tokens per model call and the token budget, `pricing.py` what calls cost in
  money and the money budget.

Each imports only `forge.agent`, the values a user gives (`forge.policy`, `forge.tools`,
`forge.output`, …) and its neighbours here; the machine, results, observers, events and the
models read them. Nothing is imported here.
"""
