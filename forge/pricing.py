"""`forge.pricing` is `forge.models.pricing` now (what calls cost): the model policies and what
their calls cost sit together in `forge.models`. This old name keeps working, with a
DeprecationWarning; import `forge.models.pricing` instead."""

import warnings

from forge.models.pricing import *  # noqa: F403  (the old name re-exports the module's names)
from forge.models.pricing import __all__  # noqa: F401

warnings.warn("forge.pricing is forge.models.pricing now: import that (the old name goes in a later release)",
              DeprecationWarning, stacklevel=2)
