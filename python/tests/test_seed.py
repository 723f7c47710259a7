"""Every seed the tool prints is accepted back exactly (issue 35, item 1).

Half of all drawn seeds are >= 2^63; they used to be clamped to 2^63 - 1 by
--seed, so a rerun drew other inputs. The round trip is checked through the
CLI's JSON, a gate spec (a string past TOML's integers), check() and pytest.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

import softmax_audit
import sa_test_kernels

HERE = os.path.dirname(os.path.abspath(__file__))
BIG = 17422727995416579491  # > 2^63, as printed by a real run
TOP = 2**64 - 1


def fast_spec(tmp_path, extra=""):
    p = tmp_path / "gate.toml"
    p.write_text('properties = ["special.values"]\nops = ["softmax"]\ndtypes = ["float32"]\n'
                 'cases = 2\n' + extra)
    return str(p)


@pytest.mark.parametrize("seed", [BIG, TOP])
def test_cli_json_carries_the_seed_it_was_given(cli, tmp_path, seed):
    out = tmp_path / "r.json"
    env = dict(os.environ, PYTHONPATH=HERE)
    r = subprocess.run([cli, "check", "--python", "sa_test_kernels:good", "--spec",
                        fast_spec(tmp_path), "--seed", str(seed), "--json", str(out), "-q"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    run = json.loads(out.read_text())["runs"][0]
    assert run["config"]["seed"] == str(seed)


def test_spec_takes_a_seed_past_2_63_as_a_string(cli, tmp_path):
    out = tmp_path / "r.json"
    env = dict(os.environ, PYTHONPATH=HERE)
    r = subprocess.run([cli, "check", "--python", "sa_test_kernels:good", "--spec",
                        fast_spec(tmp_path, f'seed = "{BIG}"\n'), "--json", str(out), "-q"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert json.loads(out.read_text())["runs"][0]["config"]["seed"] == str(BIG)


@pytest.mark.parametrize("bad", ["-1", "18446744073709551616", "1e3", " 7"])
def test_a_seed_outside_the_range_is_refused_not_clamped(cli, tmp_path, bad):
    r = subprocess.run([cli, "check", "--builtin", "naive", "--seed", bad, "-q"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "--seed" in r.stderr and "18446744073709551615" in r.stderr


def test_check_returns_the_seed_it_was_given(tmp_path):
    res = softmax_audit.check(sa_test_kernels.good, spec=fast_spec(tmp_path), seed=BIG)
    assert res.exit_code == 0
    assert res.seed == BIG


def test_pytest_plugin_runs_with_a_seed_past_2_63(tmp_path):
    spec = fast_spec(tmp_path)
    (tmp_path / "test_gate.py").write_text(textwrap.dedent(f'''
        import sa_test_kernels
        softmax_audit_kernel = sa_test_kernels.good
        softmax_audit_options = {{"seed": {BIG}, "spec": {spec!r}}}
    '''))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.environ.get("PYTHONPATH", ""), HERE]))
    junit = tmp_path / "junit.xml"
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "softmax_audit.pytest_plugin",
                        "-p", "no:cacheprovider", str(tmp_path / "test_gate.py"),
                        f"--junitxml={junit}"],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert str(BIG) in junit.read_text() + r.stdout, r.stdout
