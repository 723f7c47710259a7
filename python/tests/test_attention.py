"""Attention forward and backward from Python, every feature the Python signature
carries (varlen, window, softcap, ALiBi, sinks, key padding, GQA, both causal alignments):
a correct torch kernel (sa_test_kernels.Attention, kernel.h's semantics) passes the
attention_v2 and attention_backward properties; a GQA backward bug fails them."""
import softmax_audit
import sa_test_kernels

SPEC = """
ops = ["attention_v2", "attention_backward"]
dtypes = ["float32", "bfloat16"]
properties = ["attention_v2.*", "attention_backward.*"]
cases = 4
seed = 3
[attention]
lengths = [[5, 7], [8, 8], [1, 70], [7, 5]]
head_dims = [16]
gqa_ratios = [1, 2]
features = ["varlen", "causal", "key_padding", "bhsd", "strided", "unequal_dv", "window",
            "softcap", "alibi", "sinks"]
"""

# Varlen only (FlashAttention's packed layout), with the masks that index packed rows.
VARLEN_SPEC = """
ops = ["attention_v2", "attention_backward"]
dtypes = ["float32", "bfloat16"]
properties = ["attention_v2.rounding", "attention_v2.varlen_equals_separate",
              "attention_v2.masked_never_leak", "attention_backward.rounding",
              "attention_backward.masked_zero"]
cases = 6
seed = 7
[attention]
lengths = [[5, 7], [8, 8], [1, 70], [7, 5], [3, 1]]
head_dims = [16]
gqa_ratios = [1, 2]
features = ["varlen", "key_padding", "causal", "sinks"]
"""


def _run(kernel, tmp_path, spec=SPEC):
    p = tmp_path / "gate.toml"
    p.write_text(spec)
    return softmax_audit.check(kernel, spec=p)


def test_correct_kernel_passes_forward_and_backward(tmp_path):
    r = _run(sa_test_kernels.attention, tmp_path)
    bad = [v.describe() for v in r.verdicts if v.failed or v.outcome == "incomplete"]
    assert not bad, "\n\n".join(bad)
    ran = {(v.property, v.dtype) for v in r.verdicts if v.passed}
    for prop in ("attention_v2.rounding", "attention_v2.sink_equals_extra_key",
                 "attention_v2.window_within_causal", "attention_backward.rounding",
                 "attention_backward.gqa_group_sum", "attention_backward.masked_zero",
                 "attention_backward.no_nan"):
        assert (prop, "float32") in ran, prop
    assert ("attention_backward.flash_attention_3x", "bfloat16") in ran
    assert r.exit_code == 0


def test_varlen_passes_and_is_exercised(tmp_path):
    r = _run(sa_test_kernels.attention, tmp_path, VARLEN_SPEC)
    bad = [v.describe() for v in r.verdicts if v.failed or v.outcome == "incomplete"]
    assert not bad, "\n\n".join(bad)
    v = next(v for v in r.verdicts if v.property == "attention_v2.varlen_equals_separate"
             and v.dtype == "float32")
    assert v.passed, v.describe()
    assert r.exit_code == 0


def test_varlen_offsets_ignored_fails_with_a_packed_counterexample(tmp_path):
    r = _run(sa_test_kernels.attention_varlen_ignores_offsets, tmp_path, VARLEN_SPEC)
    failed = {v.property: v for v in r.verdicts if v.failed}
    assert "attention_v2.varlen_equals_separate" in failed, sorted(failed)
    assert " varlen" in failed["attention_v2.varlen_equals_separate"].counterexample
    assert r.exit_code == 1


def test_queries_without_keys_are_drawn_and_must_give_zero(tmp_path):
    # The varlen cases hold sequences with queries and no keys (kernel.h: out
    # 0, lse -inf); a kernel that writes anything else there fails.
    r = _run(sa_test_kernels.attention_no_keys_not_zero, tmp_path, VARLEN_SPEC)
    failed = {v.property for v in r.verdicts if v.failed}
    assert "attention_v2.rounding" in failed, sorted(failed)
    assert r.exit_code == 1


def test_gqa_backward_bug_fails_with_a_counterexample(tmp_path):
    r = _run(sa_test_kernels.attention_dk_not_summed, tmp_path)
    failed = {v.property for v in r.verdicts if v.failed}
    assert "attention_backward.rounding" in failed, sorted(failed)
    v = next(v for v in r.verdicts if v.property == "attention_backward.rounding" and v.failed)
    assert "heads=" in v.counterexample and "/" in v.counterexample, v.describe()
    assert r.exit_code == 1


LP_SPEC = """
ops = ["attention_v2"]
dtypes = ["bfloat16"]
properties = ["attention_v2.rounding"]
cases = 8
seed = 5
CONVENTIONS
[attention]
lengths = [[8, 64], [1, 239], [16, 128]]
head_dims = [64]
gqa_ratios = [1]
features = ["causal"]
"""


def test_p_rounded_to_the_input_type_is_the_named_low_precision_p_convention(tmp_path):
    # FlashAttention rounds P to bfloat16 for the P V product: undeclared, that
    # fails attention_v2.rounding with a note naming low_precision_p (a policy
    # difference, not an error); declared, the same kernel passes.
    def run(conventions):
        p = tmp_path / "gate.toml"
        p.write_text(LP_SPEC.replace("CONVENTIONS", conventions))
        return softmax_audit.check(sa_test_kernels.attention_low_precision_p, spec=p)
    undeclared = run("")
    v = next(v for v in undeclared.verdicts if v.property == "attention_v2.rounding")
    assert v.failed, v.describe()
    assert "holds under the low_precision_p convention" in v.note, v.describe()
    declared = run('conventions = ["low_precision_p"]')
    v = next(v for v in declared.verdicts if v.property == "attention_v2.rounding")
    assert v.passed, v.describe()
    assert "low_precision_p" in v.note, v.describe()
    # The correct float32-P kernel passes the same run undeclared.
    p = tmp_path / "gate.toml"
    p.write_text(LP_SPEC.replace("CONVENTIONS", ""))
    ok = softmax_audit.check(sa_test_kernels.attention, spec=p)
    v = next(v for v in ok.verdicts if v.property == "attention_v2.rounding")
    assert v.passed, v.describe()


# A declared domain: causal-only, head dims multiples of 8, bottom-right only, sinks in
# bfloat16 only (sa_test_kernels.AttentionCausalOnlyD8 refuses anything else).
DOMAIN_SPEC = """
ops = ["attention_v2"]
dtypes = ["float32", "bfloat16"]
properties = ["attention_v2.*"]
cases = 4
seed = 5
[attention]
lengths = [[5, 7], [8, 8], [1, 70], [7, 5]]
head_dims = [8, 16]
gqa_ratios = [1, 2]
"""


def test_cases_are_drawn_inside_the_declared_domain_with_full_coverage(tmp_path):
    r = _run(sa_test_kernels.attention_causal_only_d8, tmp_path, DOMAIN_SPEC)
    bad = [v.describe() for v in r.verdicts if v.failed or v.outcome == "incomplete"]
    assert not bad, "\n\n".join(bad)
    cov = {v.dtype: v for v in r.verdicts if v.property == "attention_v2.coverage"}
    assert set(cov) == {"float32", "bfloat16"}
    assert all(v.passed for v in cov.values())
    assert "sinks" in cov["bfloat16"].coverage and "sinks" not in cov["float32"].coverage
    assert "top_left" not in cov["float32"].coverage
    for v in r.verdicts:
        if v.property == "attention_v2.rounding":
            assert "not applicable" not in v.note, v.describe()
    assert r.exit_code == 0
