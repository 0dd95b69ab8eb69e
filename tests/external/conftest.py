"""The external auditors attack the task the adversarial suite generates (its ``ledger`` fixture)."""

from tests.adversarial.conftest import ledger  # noqa: F401
