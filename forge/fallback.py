"""`forge.fallback` is `forge.models.fallback` now (FallbackPolicy): the model policies and what
their calls cost sit together in `forge.models`. This old name keeps working, with a
DeprecationWarning; import `forge.models.fallback` instead."""

import warnings

from forge.models.fallback import *  # noqa: F403  (the old name re-exports the module's names)
from forge.models.fallback import __all__  # noqa: F401

warnings.warn("forge.fallback is forge.models.fallback now: import that (the old name goes in a later release)",
              DeprecationWarning, stacklevel=2)
