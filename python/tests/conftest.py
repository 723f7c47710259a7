import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)


@pytest.fixture
def cli():
    """The softmax-audit binary of this build (CTest sets SA_CLI)."""
    path = os.environ.get("SA_CLI")
    if not path:
        pytest.skip("SA_CLI not set (run through ctest)")
    return path


# Fast: the few properties each isolation test needs, float32 only.
FAST = dict(cases=3, seed=11, dtypes=["float32"])
