"""The pytest plugin: one test per kernel, property and element type, collected without
running anything; -k (a property, a type); several kernels per module; JUnit; tensor
literals."""
import os
import re
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

import softmax_audit
import sa_test_kernels
from softmax_audit import _core

HERE = os.path.dirname(os.path.abspath(__file__))

MODULE = textwrap.dedent('''
    import os
    import torch

    class Unshifted:
        name = "unshifted"
        dtypes = ("float32",)
        def softmax(self, x, temperature):
            e = torch.exp(x / temperature)  # no max subtraction: overflows above 88.7
            return e / e.sum(-1, keepdim=True)

    class Marking(Unshifted):  # leaves a file behind when the kernel is called
        name = "marking"
        def softmax(self, x, temperature):
            open(os.path.join(os.path.dirname(__file__), "called"), "w").close()
            return super().softmax(x, temperature)

    KERNELS
    softmax_audit_options = {"cases": 20, "seed": 7, "spec": SPEC, OPTIONS}
''')

SPEC = 'properties = ["special.values", "differential.ulp"]\nops = ["softmax"]\n'
# Records every softmax_audit.check call of the pytest run (its properties argument).
RECORDER = textwrap.dedent('''
    import json, softmax_audit
    _check = softmax_audit.check
    def check(kernel, **kw):
        with open("checks.jsonl", "a") as f:
            f.write(json.dumps(kw.get("properties")) + "\\n")
        return _check(kernel, **kw)
    softmax_audit.check = check
''')


def run_pytest(tmp_path, *args, kernels="softmax_audit_kernel = Unshifted()", spec=SPEC,
               conftest=RECORDER, options=""):
    path = tmp_path / "gate.toml"
    path.write_text(spec)
    (tmp_path / "test_gate.py").write_text(
        MODULE.replace("KERNELS", kernels).replace("SPEC", repr(str(path)))
        .replace("OPTIONS", options))
    (tmp_path / "conftest.py").write_text(conftest)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.environ.get("PYTHONPATH", ""), HERE]))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "softmax_audit.pytest_plugin",
                           "-p", "no:cacheprovider", str(tmp_path / "test_gate.py"), *args],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def junit_cases(path):
    # pytest's JUnit: classname the module, name "softmax_audit[<kernel>]::<property>"
    return {tc.get("name"): tc for tc in ET.parse(path).iter("testcase")}


def checks(tmp_path):
    import json
    p = tmp_path / "checks.jsonl"
    return [json.loads(line) for line in p.read_text().splitlines()] if p.exists() else []


def test_each_property_is_a_test_with_junit_and_a_literal(tmp_path):
    junit = tmp_path / "junit.xml"
    r = run_pytest(tmp_path, "-rA", f"--junitxml={junit}")
    assert r.returncode == 1, r.stdout + r.stderr  # the unshifted softmax fails
    names = junit_cases(junit)
    assert "softmax_audit[unshifted]::differential.ulp[float32]" in names, sorted(names)
    assert "softmax_audit[unshifted]::differential.ulp[bfloat16]" in names, sorted(names)
    assert "softmax_audit[unshifted]::gate.no_crash" in names
    failed = [n for n, tc in names.items() if tc.find("failure") is not None]
    assert "softmax_audit[unshifted]::differential.ulp[float32]" in failed
    # the kernel declares float32 only: its other types are skipped, never failed
    assert "softmax_audit[unshifted]::differential.ulp[bfloat16]" not in failed
    assert "torch.tensor([[" in r.stdout and "dtype=torch.float32)" in r.stdout, r.stdout
    # the seed on every item, and one gate run for the module
    assert all('name="seed"' in ET.tostring(tc, encoding="unicode") for tc in names.values())
    assert checks(tmp_path) == [None]


def test_collect_only_lists_the_suites_properties_and_calls_nothing(tmp_path):
    r = run_pytest(tmp_path, "--collect-only", "-q", kernels="softmax_audit_kernel = Marking()",
                   spec="")
    assert r.returncode == 0, r.stdout + r.stderr
    assert not (tmp_path / "called").exists() and checks(tmp_path) == []
    ids = re.findall(r"softmax_audit\[marking\]::(\S+)", r.stdout)
    # The suite's own list (the CLI's `check --list`), each once per element type
    # (attention_v2's with the fp8 types too), then the gate's checks.
    listing = subprocess.run([os.environ["SA_CLI"], "check", "--list"], capture_output=True,
                             text=True, check=True).stdout
    props = re.findall(r"^  (\S+)  — ", listing.split("distributions:")[0], re.M)
    types = ["float32", "bfloat16", "float16"]
    want = [f"{p}[{t}]" for p in props
            for t in types + (["fp8_e4m3", "fp8_e5m2"] if p.startswith("attention_v2.") else [])]
    assert len(props) > 20 and ids[:len(want)] == want, (want, ids)
    assert ids[len(want):] == _core.gate_checks() and "gate.coverage" in ids


def test_k_runs_the_selected_properties_only(tmp_path):
    junit = tmp_path / "junit.xml"
    r = run_pytest(tmp_path, "-k", "ulp", f"--junitxml={junit}")
    assert r.returncode == 1, r.stdout + r.stderr
    assert list(junit_cases(junit)) == [f"softmax_audit[unshifted]::differential.ulp[{t}]"
                                        for t in ("float32", "bfloat16", "float16")]
    assert checks(tmp_path) == [["differential.ulp"]]


def test_k_selects_an_element_type(tmp_path):
    junit = tmp_path / "junit.xml"
    r = run_pytest(tmp_path, "-k", "ulp and float32", f"--junitxml={junit}",
                   conftest=RECORDER.replace('kw.get("properties")',
                                             '[kw.get("properties"), kw.get("dtypes")]'))
    assert r.returncode == 1, r.stdout + r.stderr
    assert list(junit_cases(junit)) == ["softmax_audit[unshifted]::differential.ulp[float32]"]
    assert checks(tmp_path) == [[["differential.ulp"], ["float32"]]]
    # "float16" is also a substring of "bfloat16": pytest's -k matches substrings.
    r = run_pytest(tmp_path, "--collect-only", "-q", "-k", "float16 and not bfloat16")
    ids = re.findall(r"::(softmax_audit\S+)", r.stdout)
    assert len(ids) == 2 and all(i.endswith("[float16]") for i in ids), r.stdout


def test_k_no_crash_runs_the_suite_for_the_gate_check(tmp_path):
    junit = tmp_path / "junit.xml"
    r = run_pytest(tmp_path, "-k", "no_crash", f"--junitxml={junit}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert list(junit_cases(junit)) == ["softmax_audit[unshifted]::gate.no_crash"]
    assert checks(tmp_path) == [None]


def test_a_gate_check_the_run_does_not_report_is_skipped(tmp_path):
    junit = tmp_path / "junit.xml"
    r = run_pytest(tmp_path, "-k", "no_crash", f"--junitxml={junit}", options='"isolate": False')
    assert r.returncode == 0, r.stdout + r.stderr
    (tc,) = junit_cases(junit).values()
    assert tc.get("name") == "softmax_audit[unshifted]::gate.no_crash"
    assert "not reported by this run" in tc.find("skipped").get("message"), r.stdout


def test_two_kernels_in_one_module(tmp_path):
    junit = tmp_path / "junit.xml"
    kernels = ('import sa_test_kernels\n'
               'softmax_audit_kernels = {"good": sa_test_kernels.good, "bad": Unshifted()}')
    r = run_pytest(tmp_path, "-k", "ulp or values", "-rA", f"--junitxml={junit}",
                   kernels=kernels)
    assert r.returncode == 1, r.stdout + r.stderr
    cases = junit_cases(junit)
    failed = sorted(n for n, tc in cases.items() if tc.find("failure") is not None)
    types = ("float32", "bfloat16", "float16")
    assert sorted(cases) == sorted(f"softmax_audit[{k}]::{p}[{t}]" for k in ("good", "bad")
                                   for p in ("differential.ulp", "special.values")
                                   for t in types), sorted(cases)
    assert failed == ["softmax_audit[bad]::differential.ulp[float32]",
                      "softmax_audit[bad]::special.values[float32]"]
    assert checks(tmp_path) == [None, None]  # every property selected: the spec's run
    # -k on the kernel and the property together
    r = run_pytest(tmp_path, "--collect-only", "-q", "-k", "good and ulp", kernels=kernels)
    assert re.findall(r"::(softmax_audit\S+)", r.stdout) == [
        f"softmax_audit[good]::differential.ulp[{t}]" for t in types], r.stdout


def test_a_property_without_a_verdict_fails(tmp_path):
    # A run that drops differential.ulp's verdicts: its test must fail, never pass.
    drop = RECORDER.replace("return _check(kernel, **kw)", textwrap.dedent('''\
        r = _check(kernel, **kw)
            r.verdicts = [v for v in r.verdicts if v.property != "differential.ulp"]
            return r'''))
    junit = tmp_path / "junit.xml"
    r = run_pytest(tmp_path, "-k", "ulp", f"--junitxml={junit}",
                   kernels="import sa_test_kernels\nsoftmax_audit_kernel = sa_test_kernels.good",
                   conftest=drop)
    assert r.returncode == 1, r.stdout + r.stderr
    tcs = list(junit_cases(junit).values())
    assert len(tcs) == 3 and all(
        "the run gave no verdict" in ET.tostring(tc, encoding="unicode") for tc in tcs), r.stdout


def test_check_runs_only_the_named_properties():
    res = softmax_audit.check(sa_test_kernels.good, properties=["differential.ulp"], cases=3,
                              seed=11, dtypes=["float32"])
    assert {v.property for v in res.verdicts if not v.property.startswith("gate.")} == {
        "differential.ulp"}


def test_check_jobs_gives_the_serial_verdicts():
    # --jobs from Python: two properties in two gate processes at once, the
    # same verdicts as one after another; a bad count is the CLI's usage error.
    def run(jobs):
        res = softmax_audit.check(sa_test_kernels.good,
                                  properties=["differential.ulp", "metamorphic.sum_to_one"],
                                  cases=3, seed=11, dtypes=["float32"], jobs=jobs)
        return [(v.property, v.op, v.dtype, v.outcome, v.measured, v.bound)
                for v in res.verdicts]
    serial = run(None)
    assert {p for p, *_ in serial} >= {"differential.ulp", "metamorphic.sum_to_one"}
    assert run(2) == serial
    with pytest.raises(softmax_audit.UsageError, match="--jobs 0"):
        run(0)


def test_a_bad_spec_is_one_line_at_collection(tmp_path):
    r = run_pytest(tmp_path, "--collect-only", "-q", spec="shoe_size = 3\n")
    assert r.returncode != 0
    # the message alone under the header: no traceback
    assert re.search(r"ERROR collecting test_gate.py _+\ngate spec \S+gate.toml:1: key 'shoe_size'",
                     r.stdout), r.stdout


def test_cli_property_narrows_the_spec_and_its_required(tmp_path, cli):
    spec = tmp_path / "gate.toml"
    spec.write_text('properties = ["differential.*", "special.values"]\n'
                    'required = ["differential.ulp", "special.values"]\n')
    base = [cli, "check", "--builtin", "naive", "--spec", str(spec), "--cases", "3", "--seed", "5",
            "--dtype", "float32", "-q"]
    r = subprocess.run(base + ["--property", "differential.ulp", "--json", "-"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr  # special.values, required, is not run: not incomplete
    import json
    got = {v["property"] for v in json.loads(r.stdout)["runs"][0]["verdicts"]}
    assert {p for p in got if not p.startswith("gate.")} == {"differential.ulp"}, got
    for prop, why in (("nope", "no such property"),
                      ("determinism.*", "selects none of the properties the spec runs")):
        r = subprocess.run(base + ["--property", prop], capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and why in r.stderr, r.stderr
