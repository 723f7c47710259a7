"""pytest plugin: the property suite as one pytest test per property, op and type.

Enable it with `pytest -p softmax_audit.pytest_plugin` (or `pytest_plugins =
["softmax_audit.pytest_plugin"]` in a conftest.py). Then, in a test module,
name the kernel (an object, or "package.module:object"):

    softmax_audit_kernel = MyKernel()
    softmax_audit_options = {"cases": 20, "seed": 7}   # optional: check()'s arguments

The gate runs the suite once for that module, when pytest collects it (in
isolated child processes, like `softmax-audit check`), and every verdict
becomes a test named `<property>[<op>-<dtype>]`: `-k` selects which are run
and reported, `--junitxml` writes them, and a failure prints the claim, the
measured value against its bound and rule, and the shrunk counterexample as a
ready-to-paste torch.tensor literal. Not-applicable verdicts are skips naming
why; `incomplete` (a requested check that could not run) fails.
"""
import pytest

import softmax_audit

KERNEL_NAME = "softmax_audit_kernel"
OPTIONS_NAME = "softmax_audit_options"


class VerdictFailure(Exception):
    pass


class VerdictItem(pytest.Item):
    def __init__(self, *, verdict, **kw):
        super().__init__(**kw)
        self.verdict = verdict

    def runtest(self):
        v = self.verdict
        if v.outcome == "pass":
            return
        if v.outcome == "skip":
            pytest.skip(f"not applicable: {v.note or 'not run'}")
        raise VerdictFailure(v.describe())

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, VerdictFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"softmax-audit {self.name}"


class SuiteCollector(pytest.Collector):
    def __init__(self, *, kernel, options, **kw):
        super().__init__(**kw)
        self.kernel = kernel
        self.options = dict(options or {})

    def collect(self):
        results = softmax_audit.check(self.kernel, **self.options)
        self.results = results
        seen = set()
        for v in results.verdicts:
            name = f"{v.property}[{v.op or 'all'}-{v.dtype or 'all'}]"
            n, i = name, 2
            while n in seen:  # the same property twice (a gate finding per op): number them
                n, i = f"{name}#{i}", i + 1
            seen.add(n)
            item = VerdictItem.from_parent(self, name=n, verdict=v)
            # The run's seed, exactly (JUnit <property name="seed">): rerun with
            # softmax_audit_options = {"seed": <it>} to draw the same inputs.
            item.user_properties.append(("seed", str(results.seed)))
            yield item


@pytest.hookimpl(hookwrapper=True)
def pytest_pycollect_makeitem(collector, name, obj):
    outcome = yield
    if name != KERNEL_NAME or not isinstance(collector, pytest.Module):
        return
    options = getattr(collector.obj, OPTIONS_NAME, None)
    outcome.force_result(
        SuiteCollector.from_parent(collector, name="softmax_audit", kernel=obj, options=options))
