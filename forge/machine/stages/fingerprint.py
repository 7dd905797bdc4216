"""A call's canonical fingerprint: how a side-effecting call is recognised when it is made again
(the idempotency registry's key, an approval's binding, the repetition count)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from forge.agent.execution import ArgumentContractError, SchemaViolation

__all__ = ['NotFingerprintable', 'request_fingerprint']


class NotFingerprintable(ArgumentContractError):
    """A side-effecting call's arguments hold a value with no canonical form (an object whose
    `repr` changes from call to call), so the same call could not be recognised again and
    its side effect would run twice. Give side-effecting tools plain data."""

    def __init__(self, tool_name: str, path: str, value: Any) -> None:
        why = (f"has no canonical form (a {type(value).__name__}); a side-effecting tool takes plain data "
               "(str, int, float, bool, None, lists and dicts with string keys), so that a repeated call is "
               "recognised and not run twice")
        super().__init__(tool_name, (), (), (SchemaViolation(path, why),))


def _canonical(value: Any, path: str) -> Any:
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, (list, tuple)):
        return [_canonical(item, f"{path}[{index}]") for index, item in enumerate(value)]
    if isinstance(value, Mapping) and all(isinstance(key, str) for key in value):
        return {key: _canonical(item, f"{path}.{key}" if path else key) for key, item in value.items()}
    raise _Unfingerprintable(path or "(arguments)", value)


class _Unfingerprintable(Exception):
    def __init__(self, path: str, value: Any) -> None:
        self.path, self.value = path, value


def request_fingerprint(tool_name: str, arguments: Mapping[str, Any]) -> str:
    """A canonical SHA-256 of a call: the tool name and its arguments with sorted keys.

    Raises:
        NotFingerprintable: (an ArgumentContractError) a value is not plain data: str,
            int, float, bool, None, or lists and string-keyed mappings of those.
    """
    try:
        plain = _canonical(arguments, "")
    except _Unfingerprintable as found:
        raise NotFingerprintable(tool_name, found.path, found.value) from None
    canonical = json.dumps([tool_name, plain], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()
