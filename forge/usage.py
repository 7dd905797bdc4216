"""`forge.usage` is `forge.models.usage` now (tokens per call and the token budget): the model policies and what
their calls cost sit together in `forge.models`. This old name keeps working, with a
DeprecationWarning; import `forge.models.usage` instead."""

import warnings

from forge.models.usage import *  # noqa: F403  (the old name re-exports the module's names)
from forge.models.usage import __all__  # noqa: F401

warnings.warn("forge.usage is forge.models.usage now: import that (the old name goes in a later release)",
              DeprecationWarning, stacklevel=2)
