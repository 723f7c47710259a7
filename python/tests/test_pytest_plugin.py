"""The pytest plugin: one test per property, op and type; -k; JUnit; tensor literals."""
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))

MODULE = textwrap.dedent('''
    import torch

    class Unshifted:
        name = "unshifted"
        dtypes = ("float32",)
        def softmax(self, x, temperature):
            e = torch.exp(x / temperature)  # no max subtraction: overflows above 88.7
            return e / e.sum(-1, keepdim=True)

    softmax_audit_kernel = Unshifted()
    softmax_audit_options = {"cases": 20, "seed": 7, "spec": SPEC}
''')


def run_pytest(tmp_path, *args):
    spec = tmp_path / "gate.toml"
    spec.write_text('properties = ["special.values", "differential.ulp"]\nops = ["softmax"]\n')
    (tmp_path / "test_gate.py").write_text(MODULE.replace("SPEC", repr(str(spec))))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [os.environ.get("PYTHONPATH", ""), HERE]))
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "softmax_audit.pytest_plugin",
                           "-p", "no:cacheprovider", str(tmp_path / "test_gate.py"), *args],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)


def test_each_property_is_a_test_with_junit_and_a_literal(tmp_path):
    junit = tmp_path / "junit.xml"
    r = run_pytest(tmp_path, "-rA", f"--junitxml={junit}")
    assert r.returncode == 1, r.stdout + r.stderr  # the unshifted softmax fails
    names = {tc.get("name"): tc for tc in ET.parse(junit).iter("testcase")}
    assert "differential.ulp[softmax-float32]" in names, sorted(names)
    assert "gate.no_crash[all-all]" in names
    failed = [n for n, tc in names.items() if tc.find("failure") is not None]
    assert "differential.ulp[softmax-float32]" in failed
    assert "torch.tensor([[" in r.stdout and "dtype=torch.float32)" in r.stdout, r.stdout


def test_k_selects(tmp_path):
    junit = tmp_path / "junit.xml"
    r = run_pytest(tmp_path, "-k", "no_crash", f"--junitxml={junit}")
    assert r.returncode == 0, r.stdout + r.stderr
    names = [tc.get("name") for tc in ET.parse(junit).iter("testcase")]
    assert names == ["gate.no_crash[all-all]"]
