"""repogym: turn source repositories into verifiable RL environments for coding agents."""

__version__ = "0.1.0"
