"""pytest plugin: the property suite as one pytest test per kernel and property.

Enable it with `pytest -p softmax_audit.pytest_plugin` (or `pytest_plugins =
["softmax_audit.pytest_plugin"]` in a conftest.py). Then, in a test module,
name the kernel (an object, or "package.module:object"), or several:

    softmax_audit_kernel = MyKernel()
    softmax_audit_kernels = {"fast": Fast(), "exact": "mypkg.kernels:exact"}  # or a list
    softmax_audit_options = {"cases": 20, "seed": 7}   # optional: check()'s arguments

Collection runs nothing: each kernel becomes a collector
`softmax_audit[<kernel>]` holding one test per property the spec runs (the
suite's own list) and element type, and one per gate check, e.g.
`test_k.py::softmax_audit[fast]::differential.ulp[float32]` and
`...::gate.no_crash`; `-k float32` selects one type. The types are the
options' `dtypes` (else float32, bfloat16 and float16), and for
attention_v2.* also fp8_e4m3 and fp8_e5m2. The first test of a kernel
that runs calls the gate once (isolated child processes, as `softmax-audit
check`), restricted to the properties and types selected (`-k`, node ids);
the others read that run. A test fails on any failing verdict of its
property and type (every op; the claim, measured value, bound, rule and the
shrunk counterexample as a torch.tensor literal), skips when all are not
applicable or the run checked that type for other types only (a type the
kernel does not declare), and fails when the run gave its property no
verdict at all. A gate check the run did not report (e.g. no_crash with
isolate=False) is a skip.
"""
import os

import pytest

import softmax_audit

KERNEL_NAME = "softmax_audit_kernel"
KERNELS_NAME = "softmax_audit_kernels"
OPTIONS_NAME = "softmax_audit_options"


class VerdictFailure(Exception):
    pass


def _kernel_names(kernels):
    """(id, kernel) pairs: dict keys, else the kernel's name attribute or string."""
    pairs = list(kernels.items()) if isinstance(kernels, dict) else [
        (k if isinstance(k, str) else getattr(k, "name", type(k).__name__), k) for k in kernels]
    seen, out = set(), []
    for name, k in pairs:
        n, i = str(name), 2
        while n in seen:
            n, i = f"{name}#{i}", i + 1
        seen.add(n)
        out.append((n, k))
    return out


ROW_DTYPES = ("float32", "bfloat16", "float16")
FP8_DTYPES = ("fp8_e4m3", "fp8_e5m2")


def _dtypes_of(property, options):
    """The element types a property's items are split by (none for gate checks)."""
    given = options.get("dtypes")
    row = [given] if isinstance(given, str) else list(given or ROW_DTYPES)
    if property.startswith("attention_v2.") and not given:
        return row + list(FP8_DTYPES)
    return row


class PropertyItem(pytest.Item):
    def __init__(self, *, property, dtype=None, **kw):
        super().__init__(**kw)
        self.property = property
        self.dtype = dtype

    def runtest(self):
        results = self.parent.results()
        self.user_properties.append(("seed", str(results.seed)))
        of_property = [v for v in results.verdicts if v.property == self.property]
        mine = [v for v in of_property if self.dtype is None or v.dtype == self.dtype]
        if self.dtype is not None and not mine and of_property:
            pytest.skip(f"{self.property}: the run checked no {self.dtype} (the kernel does not "
                        "declare it, or the options leave it out)")
        if mine:
            self.add_report_section("call", "verdicts", "\n".join(
                f"{v.op or '-'}/{v.dtype or '-'}: {v.outcome}" for v in mine))
        bad = [v for v in mine if v.failed or v.outcome == "incomplete"]
        if bad:
            raise VerdictFailure("\n\n".join(v.describe() for v in bad))
        if any(v.passed for v in mine):
            return
        if mine:  # every verdict not applicable
            pytest.skip("not applicable: " + "; ".join(
                sorted({f"{v.op or '-'}/{v.dtype or '-'}: {v.note or 'not run'}" for v in mine})))
        if self.property in self.parent.gate_checks and self.property != "gate.coverage":
            pytest.skip(f"{self.property}: not reported by this run (it applies only to "
                        "isolated runs on host memory)")
        others = [v.describe() for v in results.failures()]
        raise VerdictFailure(f"{self.property}: the run gave no verdict (nothing was checked)"
                             + "".join("\n\n" + o for o in others))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, (VerdictFailure, softmax_audit.UsageError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"softmax-audit {self.parent.name}::{self.name}"


class KernelCollector(pytest.Collector):
    """One kernel's properties; runs the gate once, on the first test that needs it."""

    def __init__(self, *, kernel, options, **kw):
        super().__init__(**kw)
        self.kernel = kernel
        self.options = dict(options or {})
        self._results = self._error = None

    def collect(self):
        from . import _core

        if "properties" in self.options:
            raise self.CollectError(f"{OPTIONS_NAME}: 'properties' is not an option here; "
                                    "select properties with -k or the spec's 'properties'")
        spec = self.options.get("spec")
        try:
            properties = _core.planned_properties(None if spec is None else os.fspath(spec))
        except ValueError as e:
            raise self.CollectError(str(e)) from None
        self.gate_checks = _core.gate_checks()
        self.properties = properties
        for p in properties:
            for t in _dtypes_of(p, self.options):
                yield PropertyItem.from_parent(self, name=f"{p}[{t}]", property=p, dtype=t)
        for p in self.gate_checks:
            yield PropertyItem.from_parent(self, name=p, property=p)

    def results(self):
        if self._error is not None:
            raise self._error
        if self._results is None:
            # This kernel's properties that the session runs (after -k and
            # deselection); when none but gate checks: the whole suite.
            mine = [i for i in self.session.items
                    if i.parent is self and i.property in self.properties]
            selected = sorted({i.property for i in mine})
            options = dict(self.options)
            if selected and len(selected) < len(self.properties):
                options["properties"] = selected
            # The types selected: the run is narrowed to them when they are
            # row types (--dtype) and not every one of them.
            types = sorted({i.dtype for i in mine if i.dtype})
            every = set(_dtypes_of("", self.options))
            if types and set(types) <= every and set(types) != every:
                options["dtypes"] = types
            try:
                self._results = softmax_audit.check(self.kernel, **options)
            except softmax_audit.UsageError as e:
                self._error = e
                raise
        return self._results


@pytest.hookimpl(hookwrapper=True)
def pytest_pycollect_makeitem(collector, name, obj):
    outcome = yield
    if name not in (KERNEL_NAME, KERNELS_NAME) or not isinstance(collector, pytest.Module):
        return
    options = getattr(collector.obj, OPTIONS_NAME, None)
    kernels = _kernel_names([obj] if name == KERNEL_NAME else obj)
    outcome.force_result([
        KernelCollector.from_parent(collector, name=f"softmax_audit[{k}]", kernel=kernel,
                                    options=options)
        for k, kernel in kernels])
