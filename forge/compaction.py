"""`forge.compaction` is `forge.models.compaction` now (keeping a conversation within its
model's context): the model policies and what their calls cost sit together in
`forge.models`. This old name keeps working, with a
DeprecationWarning; import `forge.models.compaction` instead."""

import warnings

from forge.models.compaction import *  # noqa: F403  (the old name re-exports the module's names)
from forge.models.compaction import __all__  # noqa: F401

warnings.warn("forge.compaction is forge.models.compaction now: import that (the old name goes in a later release)",
              DeprecationWarning, stacklevel=2)
