"""softmax-audit check --python: same options, isolation and exit codes as --plugin."""
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cli, *args, timeout=120):
    env = dict(os.environ)
    env["PYTHONPATH"] = HERE  # where sa_test_kernels is; the CLI adds the package itself
    return subprocess.run([cli, "check", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


ARGS = ["--dtype", "float32", "--cases", "3", "--seed", "11"]


def spec(tmp_path):
    p = tmp_path / "gate.toml"
    p.write_text('properties = ["special.values"]\nops = ["softmax", "log_softmax"]\n')
    return str(p)


def test_good_kernel_exits_0_and_writes_json(cli, tmp_path):
    out = tmp_path / "r.json"
    r = run(cli, "--python", "sa_test_kernels:good", "--spec", spec(tmp_path), "--json",
            str(out), *ARGS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert '"python:sa_test_kernels:good"' in out.read_text()


def test_crashing_kernel_exits_1_with_a_verdict(cli, tmp_path):
    r = run(cli, "--python", "sa_test_kernels:segfault", "--spec", spec(tmp_path), *ARGS)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "gate.no_crash" in r.stdout


def test_hanging_kernel_is_killed_at_the_timeout(cli, tmp_path):
    r = run(cli, "--python", "sa_test_kernels:hang", "--spec", spec(tmp_path), "--timeout", "10",
            *ARGS)
    assert r.returncode == 1 and "gate.no_hang" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize("name", ["os.system('ls')", "sa_test_kernels", "a:b:c", "x;y:z",
                                  "$(touch /tmp/sa-pwned):k", "-m:k", "a..b:k", "a:" + "b" * 300])
def test_bad_name_is_one_line_exit_2(cli, name, tmp_path):
    r = run(cli, "--python", name, *ARGS)
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "expected package.module:object" in lines[0], r.stderr
    assert not os.path.exists("/tmp/sa-pwned")


def test_missing_module_is_a_load_error(cli):
    r = run(cli, "--python", "no_such_module_sa:kernel", *ARGS)
    assert r.returncode == 2
    assert "No module named" in r.stderr and "no_such_module_sa" in r.stderr


def test_import_is_never_in_the_gate_process(cli, tmp_path):
    # A module whose import kills its process: a load error (exit 2), named.
    (tmp_path / "dies_on_import.py").write_text("import os\nos._exit(7)\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    r = subprocess.run([cli, "check", "--python", "dies_on_import:k", *ARGS],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 2 and "exited with status 7" in r.stderr, r.stderr


def test_cuda_kernel_without_a_device_is_exit_2_checking_nothing(cli):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is usable here: test_isolation runs the kernel on it")
    r = run(cli, "--python", "sa_test_kernels:cuda_softmax", *ARGS)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no CUDA device is usable here" in r.stderr and "nothing was checked" in r.stderr
