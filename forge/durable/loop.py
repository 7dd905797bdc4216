"""Where earlier releases kept `DurableLoop` and its kin: durability is now a capability of
the loop (`loop.durable(name, db)`, `forge.durable.durability`); these names still import
from here."""

from forge.durable.durability import DurableLoop
from forge.durable.host import executor_name, launch, shutdown
from forge.durable.result import DurableResult, wait_for

__all__ = ["DurableLoop", "DurableResult", "executor_name", "launch", "shutdown", "wait_for"]
