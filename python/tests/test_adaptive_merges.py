"""Adaptive softmax and the split-KV / streamed-entropy merges from Python: correct
torch kernels (sa_test_kernels.Adaptive, Merges) pass every property the suite has
for these operations; a kernel that divides the logits by beta, and one that weighs
an empty part (lse -inf) as if its lse were 0, fail with a counterexample."""
import softmax_audit
import sa_test_kernels

ADAPTIVE = """
ops = ["adaptive_softmax"]
dtypes = ["float32", "bfloat16"]
cases = 20
seed = 1
"""

MERGES = """
ops = ["merge_entropy_states", "merge_attention_states", "merge_attention_states_n"]
cases = 20
seed = 1
"""


def _run(kernel, spec, tmp_path):
    p = tmp_path / "gate.toml"
    p.write_text(spec)
    return softmax_audit.check(kernel, spec=p)


def _judged(r):
    return {(v.property, v.op, v.dtype): v for v in r.verdicts
            if not v.property.startswith("gate.")}


def test_adaptive_softmax_passes(tmp_path):
    r = _run(sa_test_kernels.adaptive, ADAPTIVE, tmp_path)
    bad = [v.describe() for v in r.verdicts if v.failed or v.outcome == "incomplete"]
    assert not bad, "\n\n".join(bad)
    passed = {(p, t) for (p, _, t), v in _judged(r).items() if v.passed}
    for t in ("float32", "bfloat16"):
        for prop in ("differential.ulp", "metamorphic.adaptive_beta", "interface.sizes",
                     "special.values"):
            assert (prop, t) in passed, (prop, t, sorted(passed))
    assert r.exit_code == 0


def test_adaptive_softmax_dividing_by_beta_fails(tmp_path):
    r = _run(sa_test_kernels.adaptive_divides_by_beta, ADAPTIVE, tmp_path)
    failed = [v for v in r.verdicts if v.failed]
    assert {v.property for v in failed} >= {"differential.ulp", "interface.sizes"}, \
        sorted(v.property for v in failed)
    v = next(v for v in failed if v.property == "differential.ulp")
    assert "values=" in v.counterexample, v.describe()
    assert r.exit_code == 1


def test_merges_pass(tmp_path):
    r = _run(sa_test_kernels.merges, MERGES, tmp_path)
    bad = [v.describe() for v in r.verdicts if v.failed or v.outcome == "incomplete"]
    assert not bad, "\n\n".join(bad)
    ops = {op for (p, op, _), v in _judged(r).items() if v.passed}
    assert ops >= {"merge_entropy_states", "merge_attention_states",
                   "merge_attention_states_n"}, sorted(ops)
    assert r.exit_code == 0


def test_merge_weighing_an_empty_part_fails(tmp_path):
    r = _run(sa_test_kernels.merges_ignore_empty, MERGES, tmp_path)
    failed = [v for v in r.verdicts if v.failed]
    assert {v.op for v in failed} >= {"merge_attention_states", "merge_attention_states_n"}, \
        [v.describe() for v in failed]
    assert any("lse_a = -inf" in v.counterexample for v in failed if v.property ==
               "special.values"), [v.describe() for v in failed]
    # the entropy-state merge is right in this kernel and passes
    assert not any(v.op == "merge_entropy_states" for v in failed)
    assert r.exit_code == 1
