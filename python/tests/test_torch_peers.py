"""PyTorch's CPU operators through the Python path (softmax_audit.torch_ops).

The run is small (a few cases per property, seed fixed); every verdict that is
not a pass must be one of the named differences below, each with the reason
(README, "From Python": the findings and the command that reproduces them).
A difference that disappears fails the test too, so the list stays true.
"""
import pytest

import softmax_audit
from softmax_audit import torch_ops

SPEC = """
ops = ["softmax", "log_softmax", "logsumexp", "attention_v2"]
properties = PROPS
cases = 4
seed = 7
[attention]
lengths = [[5, 7], [8, 8]]
head_dims = [16]
gqa_ratios = [1, 2]
features = ["causal", "key_padding", "bhsd", "strided", "unequal_dv"]
"""

# (property, op, dtype) -> why it is not a pass
EXPECTED = {}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    p = tmp_path_factory.mktemp("peer") / "gate.toml"
    p.write_text(SPEC.replace("PROPS", '["special.values", "differential.ulp", '
                              '"metamorphic.sum_to_one", "attention_v2.rounding"]'))
    return softmax_audit.check(torch_ops.kernel, spec=p)


def test_every_verdict_passes_or_is_a_named_difference(results):
    got = {(v.property, v.op, v.dtype): v for v in results.verdicts if not v.passed}
    unexpected = {k: v.describe() for k, v in got.items() if k not in EXPECTED}
    assert not unexpected, "\n\n".join(unexpected.values())
    gone = [k for k in EXPECTED if k not in got]
    assert not gone, f"named differences no longer seen: {gone}"
