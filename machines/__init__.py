"""forge's built-in loop definitions, shipped inside the package as `forge.machines`.

Each `*.toml` file here is one machine; `forge.records.definition.load_definition` reads them.
"""
