"""softmax-audit from Python: gate a PyTorch or NumPy softmax/attention kernel.

    import softmax_audit
    results = softmax_audit.check(kernel, cases=20, seed=7)
    assert results.ok, results.summary()

`check` runs the same property suite and gate as `softmax-audit check` (the C++
code, in softmax_audit._core), with the kernel in isolated child processes; it
returns the run as the CLI's --json writes it. How a kernel is declared:
softmax_audit._adapter. The pytest plugin: softmax_audit.pytest_plugin.
"""

import json as _json
import os as _os
import sys as _sys
import tempfile as _tempfile
from dataclasses import dataclass, field

# OpenMP worker threads of the C++ suite wait passively (issue 32): a spinning
# wait took a third of a check's CPU and, on a shared machine, the cores from
# the kernel under test. libgomp reads this when it is loaded, so it is set
# before _core is imported; it has no effect if another module loaded libgomp
# first, and a value the user set is kept.
_os.environ.setdefault("OMP_WAIT_POLICY", "passive")

from ._adapter import ATTENTION_FEATURES, DTYPES, OPS, Unsupported  # noqa: F401
from ._literal import tensor_literal  # noqa: F401

EXIT_PASS, EXIT_FAIL, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 3


class UsageError(ValueError):
    """A bad argument, spec or kernel declaration (the CLI's exit code 2)."""


@dataclass
class Verdict:
    property: str
    op: str
    dtype: str
    outcome: str  # pass, fail, skip, error, incomplete
    claim: str
    measured: object
    bound: object
    rule: dict
    counterexample: str
    note: str = ""
    worst_case: str = ""
    kernel: str = ""
    seconds: object = None  # wall seconds the suite spent on it (None: not measured)
    kernel_seconds: object = None  # of those, inside the kernel's calls (None: not measured)
    cases: object = None  # cases the verdict was decided on (None: not counted)
    # A coverage verdict's table: {cell: (cases run, cases required)}; else empty.
    coverage: dict = None

    @property
    def passed(self):
        return self.outcome == "pass"

    @property
    def failed(self):
        return self.outcome in ("fail", "error")

    def describe(self):
        """The verdict in words, with a ready-to-paste tensor for a counterexample."""
        lines = [f"[{self.outcome}] {self.property} [{self.op or '-'}/{self.dtype or '-'}]",
                 f"claim: {self.claim}",
                 f"measured {self.measured} vs bound {self.bound} "
                 f"(rule {self.rule.get('id', '')}: {self.rule.get('source', '')})"]
        if self.counterexample:
            lines.append(f"counterexample: {self.counterexample}")
            lit = tensor_literal(self.counterexample, self.dtype)
            if lit:
                lines.append(f"as a tensor: {lit}")
        if self.note:
            lines.append(f"note: {self.note}")
        return "\n".join(lines)


@dataclass
class Results:
    """One gate run, as `softmax-audit check --json` writes it."""
    exit_code: int
    data: dict
    verdicts: list = field(default_factory=list)

    @property
    def status(self):
        return {EXIT_PASS: "pass", EXIT_FAIL: "fail", EXIT_INCOMPLETE: "incomplete"}.get(
            self.exit_code, "error")

    @property
    def ok(self):
        return self.exit_code == EXIT_PASS

    @property
    def run(self):
        return self.data["runs"][0]

    @property
    def seed(self):
        return int(self.run["config"]["seed"])

    def failures(self):
        return [v for v in self.verdicts if v.failed or v.outcome == "incomplete"]

    def summary(self):
        s = self.run.get("summary", {})
        head = (f"{self.run['kernel']['name']}: {self.status} "
                f"({', '.join(f'{k} {v}' for k, v in s.items())}; seed {self.seed})")
        return "\n\n".join([head] + [v.describe() for v in self.failures()])

    def to_json(self):
        return _json.dumps(self.data, indent=2)


def _verdicts(data):
    out = []
    for v in data["runs"][0]["verdicts"]:
        out.append(Verdict(property=v.get("property", ""), op=v.get("op", ""),
                           dtype=v.get("dtype", ""), outcome=v.get("outcome", ""),
                           claim=v.get("claim", ""), measured=v.get("measured"),
                           bound=v.get("bound"), rule=v.get("rule", {}) or {},
                           counterexample=v.get("counterexample", ""), note=v.get("note", ""),
                           worst_case=v.get("worst_case", ""), kernel=v.get("kernel", ""),
                           seconds=v.get("seconds"), kernel_seconds=v.get("kernel_seconds"),
                           cases=v.get("cases"),
                           coverage={c["cell"]: (c["cases"], c["required"])
                                     for c in v.get("coverage", []) or []}))
    return out


def check(kernel, spec=None, seed=None, cases=None, dtypes=None, timeout=None, deadline=None,
          isolate=True, junit=None, per_property=False, properties=None, jobs=None):
    """Runs the property suite on `kernel` (an object, or "package.module:object").

    Arguments are `softmax-audit check`'s options (spec: a gate spec TOML path;
    properties: ids or "prefix.*" patterns, running only those of the spec's;
    jobs: gate processes at once, an integer or "auto", as `--jobs`; None: the
    CLI's default, auto, or 1 with isolate=False).
    Returns Results (exit_code as the CLI's: 0 pass, 1 fail, 3 incomplete);
    raises UsageError for what the CLI answers with exit code 2.
    """
    from . import _core

    argv = ["softmax-audit", "check", "-q"]
    obj = None
    if isinstance(kernel, str):
        why = _core.python_name_error(kernel)
        if why:
            raise UsageError(f"kernel {kernel!r}: {why}")
        argv += ["--python", kernel]
    else:
        obj = kernel
        argv += ["--python", "object:kernel"]
        device = str(getattr(kernel, "device", "cpu"))
        torch = _sys.modules.get("torch")
        if device.startswith("cuda") and torch is not None and torch.cuda.is_initialized():
            raise UsageError(
                f"kernel object with device = {device!r}: this process has initialised CUDA, "
                "which the gate's forked child processes cannot use; pass the kernel by name "
                "(\"package.module:object\"), which only the children import")
    if spec is not None:
        argv += ["--spec", _os.fspath(spec)]
    for opt, val in (("--seed", seed), ("--cases", cases), ("--timeout", timeout),
                     ("--deadline", deadline), ("--junit", junit), ("--jobs", jobs)):
        if val is not None:
            argv += [opt, _os.fspath(val) if opt == "--junit" else str(val)]
    for p in [properties] if isinstance(properties, str) else properties or ():
        argv += ["--property", p]
    for d in dtypes or ():
        argv += ["--dtype", str(d).replace("torch.", "")]
    if not isolate:
        argv.append("--no-isolation")
    if per_property:
        argv.append("--per-property")
    fd, path = _tempfile.mkstemp(prefix="softmax-audit-", suffix=".json")
    _os.close(fd)
    try:
        argv += ["--json", path]
        code, err = _core.main(argv, obj, True)
        if code == EXIT_USAGE:
            raise UsageError(err.strip() or "softmax-audit check: usage or load error")
        with open(path) as f:
            data = _json.load(f)
    finally:
        if _os.path.exists(path):
            _os.unlink(path)
    return Results(exit_code=code, data=data, verdicts=_verdicts(data))
