"""The processor runtime's typed errors (all exit 2: they are the user's code or configuration, and nothing is
written when they are raised before a batch's writes are applied)."""

from __future__ import annotations

from blobstate.errors import ConfigurationError


class StateVariableError(ConfigurationError):
    """A state variable or timer used against Spark's rules: a TTL without the ProcessingTime time mode, a
    negative TTL, a variable declared twice or outside ``init``, a state call without a grouping key, a value that
    does not fit its schema, an empty list given to ``ListState.put``, a timer in time mode None (exit 2)."""


class StateSchemaError(ConfigurationError):
    """A restart declares a state variable (or the grouping key, or the time mode) incompatibly with what the store
    recorded: a field removed or retyped, a map's user key changed, a variable of another kind (exit 2). Raised
    right after the processor's ``init``, before the batch writes anything.

    ``variable`` names the variable (``"<grouping key>"``, ``"<time mode>"`` for those), ``role`` the schema
    (``"value"``, ``"user key"``, ``"kind"``), ``recorded``/``declared`` both sides."""

    def __init__(self, variable: str, role: str, recorded: str, declared: str, detail: str = "") -> None:
        self.variable, self.role, self.recorded, self.declared = variable, role, recorded, declared
        super().__init__(f"state variable {variable!r}: the {role} schema declared now ({declared}) is incompatible "
                         f"with the one recorded with the store ({recorded})" + (f": {detail}" if detail else "")
                         + "; only nullable fields may be added. Use a new variable name, or "
                         "handle.deleteIfExists() the old one first")
