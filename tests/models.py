"""What the tests that speak to a model through forge need of the llm extra, asked for only by
the tests that use it: where `openai` is not installed those tests skip, saying why, and the
rest of their module runs (a module-level skip would skip every test beside them)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

REASON = "the llm extra is a test dependency: python3 tasks.py test installs it"


def llm() -> ModuleType:
    """`forge.models.chat`, or this test skipped where the openai client is not installed."""
    pytest.importorskip("openai", reason=REASON)
    import forge.models.chat

    return forge.models.chat


def chat_policy(server: Any, model: str = "test-model", **options: Any) -> Any:
    """A `ChatPolicy` speaking to the local chat server `server` (sync and async clients,
    no retries), with `options`; skips the test without the openai client."""
    openai = pytest.importorskip("openai", reason=REASON)
    return llm().ChatPolicy(model, client=openai.OpenAI(base_url=server.url, api_key="k", max_retries=0),
                            async_client=openai.AsyncOpenAI(base_url=server.url, api_key="k", max_retries=0),
                            **options)
