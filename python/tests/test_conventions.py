"""Conventions declared in Python (issue 31): a plain PyTorch softmax and
log_softmax, written as a user writes them, with ieee_special_values declared
on the kernel object (no gate spec key).

torch.softmax and torch.log_softmax give NaN for a row whose every logit is
-inf and for a row holding +inf, by IEEE arithmetic (kernel.h defines the
limits instead). Declared, those NaN are allowed wherever the suite looks,
gate.no_nan_output included, and the run passes; undeclared, it fails and the
failing verdicts name the convention.
"""
import pytest

import softmax_audit

torch = pytest.importorskip("torch")

# The convention must come from the kernel: the spec restricts the run only.
# temperature = 1: the kernels have no temperature of their own (x / theta
# before torch.softmax would round twice).
SPEC = """
ops = ["softmax", "log_softmax"]
dtypes = ["float32"]
properties = ["special.values", "differential.ulp", "metamorphic.sum_to_one"]
temperature = 1.0
cases = 4
seed = 7
"""


class PlainTorch:
    """torch.softmax and torch.log_softmax over the last dimension."""
    dtypes = ("float32",)

    def softmax(self, x, temperature):
        return torch.softmax(x / temperature, dim=-1)

    def log_softmax(self, x, temperature):
        return torch.log_softmax(x / temperature, dim=-1)


class DeclaredTorch(PlainTorch):
    """The same, declaring what it does with IEEE special values."""
    conventions = ("ieee_special_values",)


def _run(tmp_path, kernel):
    p = tmp_path / "gate.toml"
    p.write_text(SPEC)
    return softmax_audit.check(kernel, spec=p)


def test_declared_in_python_passes(tmp_path):
    r = _run(tmp_path, DeclaredTorch())
    bad = [v.describe() for v in r.verdicts if v.failed or v.outcome == "incomplete"]
    assert not bad, "\n\n".join(bad)
    assert r.exit_code == 0
    nan = [v for v in r.verdicts if v.property == "gate.no_nan_output"]
    assert nan and all(v.passed for v in nan), [v.describe() for v in nan]


def test_undeclared_fails_naming_the_convention(tmp_path):
    r = _run(tmp_path, PlainTorch())
    assert r.exit_code == 1
    failed = {(v.property, v.op) for v in r.verdicts if v.failed}
    assert ("special.values", "softmax") in failed, sorted(failed)
    assert any(v.property == "gate.no_nan_output" for v in r.verdicts if v.failed), sorted(failed)
    for v in r.verdicts:
        if v.failed and v.property in ("special.values", "gate.no_nan_output"):
            assert "ieee_special_values" in v.note, v.describe()


def test_unknown_convention_is_a_usage_error(tmp_path):
    class Typo(PlainTorch):
        conventions = ("ieee_special_value",)

    with pytest.raises((softmax_audit.UsageError, ValueError)):
        _run(tmp_path, Typo())


class NoTemperatureTorch(DeclaredTorch):
    """torch.softmax as it is: no temperature parameter, and it says so."""
    conventions = ("ieee_special_values", "no_temperature")

    def softmax(self, x, temperature):
        assert temperature == 1.0, f"called at temperature {temperature}"
        return torch.softmax(x, dim=-1)

    def log_softmax(self, x, temperature):
        assert temperature == 1.0, f"called at temperature {temperature}"
        return torch.log_softmax(x, dim=-1)


def test_no_temperature_declared_in_python_is_called_at_one_only(tmp_path):
    # No `temperature = 1.0` in the spec: the declaration alone keeps every
    # call at temperature 1 (the kernel raises otherwise).
    p = tmp_path / "gate.toml"
    p.write_text(SPEC.replace("temperature = 1.0\n", ""))
    r = softmax_audit.check(NoTemperatureTorch(), spec=p)
    bad = [v.describe() for v in r.verdicts if v.failed or v.outcome == "incomplete"]
    assert not bad, "\n\n".join(bad)
    assert r.exit_code == 0
    judged = [v for v in r.verdicts if v.outcome == "pass" and v.property == "differential.ulp"]
    assert judged and all("no_temperature" in v.note for v in judged)


def test_every_convention_of_the_suite_is_declarable_in_python():
    from softmax_audit import _adapter
    assert {"lse_base2", "masked_lse_inf", "no_temperature", "ieee_special_values",
            "alibi_lse_shift", "lse_without_sink", "finite_mask"} <= set(_adapter.CONVENTIONS)
