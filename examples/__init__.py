"""The examples the documentation runs: shipped in the wheel as `forge.examples`, written
out for a reader by `forge examples [DIR]`."""
