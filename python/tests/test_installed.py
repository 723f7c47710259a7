"""The package as `cmake --install` puts it: into a fresh prefix, then used with
nothing of the build tree on the path. Claims: Python finds the package and its
dist-info in the prefix's site directory; the pytest11 entry point loads the
plugin with no `-p` (each property becomes a test); the installed CLI's
`check --python` runs a kernel through the installed package. The test fails
(never skips) when it is run without the build directory it installs from."""
import glob
import json
import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

MODULE = textwrap.dedent('''
    import torch

    class Softmax:  # kernel.h's special values: masked rows 0, +inf items share the weight
        dtypes = ("float32",)
        def softmax(self, x, temperature):
            z = x.float() / temperature; m = z.amax(-1, keepdim=True)
            e = torch.where(m.isposinf(), (z == m).float(),
                            (z - m.nan_to_num(0.0, 0.0, 0.0)).exp())
            s = e.sum(-1, keepdim=True)
            return torch.where(s == 0, torch.zeros_like(e), e / s).to(x.dtype)

    kernel = Softmax()
    softmax_audit_kernel = kernel
    softmax_audit_options = {"cases": 10, "seed": 7, "spec": SPEC}
''')


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    build, cmake = os.environ.get("SA_BUILD_DIR"), os.environ.get("SA_CMAKE")
    assert build and cmake, "run through CTest (python.installed): SA_BUILD_DIR and SA_CMAKE unset"
    prefix = tmp_path_factory.mktemp("prefix")
    r = subprocess.run([cmake, "--install", build, "--prefix", str(prefix)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    infos = glob.glob(str(prefix / "lib" / "*" / "dist-packages" / "softmax_audit-*.dist-info"))
    assert len(infos) == 1, r.stdout
    site = os.path.dirname(infos[0])
    work = tmp_path_factory.mktemp("user")
    spec = work / "gate.toml"
    spec.write_text('properties = ["special.values", "differential.ulp"]\nops = ["softmax"]\n')
    (work / "test_gate.py").write_text(MODULE.replace("SPEC", repr(str(spec))))
    # Nothing of the build tree: the prefix's site directory and the user's module.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "SA_CLI")}
    env["PYTHONPATH"] = os.pathsep.join([site, str(work)])
    return prefix, site, work, env


def test_package_and_entry_point_come_from_the_prefix(installed):
    prefix, site, work, env = installed
    code = ("import importlib.metadata as m, softmax_audit; print(softmax_audit.__file__); "
            "print([e.value for e in m.entry_points(group='pytest11') if e.name == 'softmax_audit'])")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=work, timeout=120)
    assert r.returncode == 0, r.stderr
    where, eps = r.stdout.splitlines()
    assert where.startswith(site), where
    assert eps == "['softmax_audit.pytest_plugin']", eps


def test_pytest_loads_the_plugin_without_p(installed):
    prefix, site, work, env = installed
    junit = work / "junit.xml"
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                        f"--junitxml={junit}", str(work / "test_gate.py")],
                       capture_output=True, text=True, env=env, cwd=work, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    names = {tc.get("name") for tc in ET.parse(junit).iter("testcase")}
    assert "softmax_audit[Softmax]::differential.ulp[float32]" in names, sorted(names)
    assert "softmax_audit[Softmax]::special.values[float32]" in names, sorted(names)


def test_installed_cli_checks_a_python_kernel(installed):
    prefix, site, work, env = installed
    cli = prefix / "bin" / "softmax-audit"
    out = work / "r.json"
    r = subprocess.run([str(cli), "check", "--python", "test_gate:kernel", "--spec",
                        str(work / "gate.toml"), "--cases", "5", "--seed", "7", "--json", str(out)],
                       capture_output=True, text=True, env=env, cwd=work, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    verdicts = json.loads(out.read_text())["runs"][0]["verdicts"]
    ulp = [v for v in verdicts if v["property"] == "differential.ulp" and v["op"] == "softmax"
           and v["dtype"] == "float32"]
    assert ulp and ulp[0]["outcome"] == "pass", ulp
