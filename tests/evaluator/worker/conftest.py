"""The end-to-end tests here discard their spare workers after each test (see the fixture)."""

from tests.adversarial.conftest import discard_idle_spares  # noqa: F401
