"""Explorer adapters: the contract, the registry and the built-in readers."""

from repogym.explorer.adapters.base import (
    Adapter,
    AdapterError,
    EnvReader,
    adapters,
    pick,
    register,
    unregister,
)

__all__ = ["Adapter", "AdapterError", "EnvReader", "adapters", "pick", "register", "unregister"]
