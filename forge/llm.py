"""`forge.llm` is `forge.models.chat` now (ChatPolicy, the chat-completions policy): the
model policies and what their calls cost sit together in `forge.models`. This old name keeps working, with a
DeprecationWarning; import `forge.models.chat` instead."""

import warnings

from forge.models.chat import *  # noqa: F403  (the old name re-exports the module's names)
from forge.models.chat import __all__  # noqa: F401

warnings.warn("forge.llm is forge.models.chat now: import that (the old name goes in a later release)",
              DeprecationWarning, stacklevel=2)
