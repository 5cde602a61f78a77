"""pytest configuration: KDA_REQUIRE_TORCH=1 (set by .ci/run) turns a missing torch into an
error instead of silently skipping every torch test (the torch CPU ops, the example, the
fuzzer's device path)."""
from __future__ import annotations

import os

import pytest


def pytest_configure(config):
    if os.environ.get("KDA_REQUIRE_TORCH") == "1":
        try:
            import torch  # noqa: F401
        except ImportError as e:
            raise pytest.UsageError(f"KDA_REQUIRE_TORCH=1 but torch cannot be imported: {e}") from e
