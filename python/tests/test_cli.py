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


# Issue 29, item 1: `check --python` ran `python3 -m softmax_audit` from the
# working directory, so a softmax_audit.py there replaced the gate (exit 0 and
# its own PASS). The package is imported from the build's or the install's
# directory only.
@pytest.mark.parametrize("shadow", ["module", "package"])
def test_softmax_audit_in_the_working_directory_never_replaces_the_gate(cli, tmp_path, shadow):
    forged = "import sys\nprint('PASS 99 passed, 0 failed')\nsys.exit(0)\n"
    if shadow == "module":
        (tmp_path / "softmax_audit.py").write_text(forged)
    else:
        (tmp_path / "softmax_audit").mkdir()
        (tmp_path / "softmax_audit" / "__init__.py").write_text(forged)
        (tmp_path / "softmax_audit" / "__main__.py").write_text(forged)
    env = dict(os.environ, PYTHONPATH=HERE)
    r = subprocess.run([cli, "check", "--python", "sa_test_kernels:segfault", "--spec",
                        spec(tmp_path), *ARGS], capture_output=True, text=True, env=env,
                       timeout=120, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "gate.no_crash" in r.stdout and "PASS 99" not in r.stdout, r.stdout + r.stderr


def fake_interpreter(directory, python, marker, prelude=""):
    """An executable `python3` in `directory` that records its use in `marker`
    and runs `python` with the same arguments."""
    directory.mkdir(parents=True, exist_ok=True)
    exe = directory / "python3"
    exe.write_text(f"#!/bin/sh\n{prelude}echo used > '{marker}'\nexec '{python}' \"$@\"\n")
    exe.chmod(0o755)
    return exe


# Issue 29, item 1: the interpreter is the one the user runs (an active
# virtual environment's, or python3 on PATH), not always the configured one.
def test_the_active_virtual_environment_interpreter_runs_the_kernel(cli, tmp_path):
    import sys
    marker = tmp_path / "venv-used"
    fake_interpreter(tmp_path / "venv" / "bin", sys.executable, marker)
    env = dict(os.environ, PYTHONPATH=HERE, VIRTUAL_ENV=str(tmp_path / "venv"))
    r = subprocess.run([cli, "check", "--python", "sa_test_kernels:good", "--spec",
                        spec(tmp_path), *ARGS], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert marker.exists(), "the virtual environment's python was not used"


def test_python3_on_path_runs_the_kernel_without_a_virtual_environment(cli, tmp_path):
    import sys
    marker = tmp_path / "path-used"
    fake_interpreter(tmp_path / "bin", sys.executable, marker)
    env = dict(os.environ, PYTHONPATH=HERE, PATH=f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    env.pop("VIRTUAL_ENV", None)
    r = subprocess.run([cli, "check", "--python", "sa_test_kernels:good", "--spec",
                        spec(tmp_path), *ARGS], capture_output=True, text=True, env=env,
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert marker.exists(), "python3 on PATH was not used"


# An interpreter that cannot import the package's compiled module (another
# Python version, say; simulated by a sitecustomize that refuses it): one
# line, exit 2, naming the interpreter and the one softmax-audit was built for.
def test_an_interpreter_that_cannot_import_the_package_is_exit_2_naming_it(cli, tmp_path):
    import sys
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'softmax_audit._core':\n"
        "            raise ImportError('built for another Python')\n"
        "sys.meta_path.insert(0, _Refuse())\n")
    fake_interpreter(tmp_path / "venv" / "bin", sys.executable, tmp_path / "used",
                     prelude=f"export PYTHONPATH='{site}':\"$PYTHONPATH\"\n")
    env = dict(os.environ, PYTHONPATH=HERE, VIRTUAL_ENV=str(tmp_path / "venv"))
    r = subprocess.run([cli, "check", "--python", "sa_test_kernels:good", *ARGS],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "built for another Python" in lines[0] and "softmax-audit was built for" in lines[0]
    assert "VIRTUAL_ENV" in lines[0] and "nothing was checked" in lines[0], lines[0]


# The active environment lacks torch, which the kernel imports: one line,
# exit 2, naming that interpreter (simulated by a sitecustomize refusing torch).
def test_an_environment_without_torch_is_one_line_exit_2_naming_its_interpreter(cli, tmp_path):
    import sys
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        "class _Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'torch':\n"
        "            raise ModuleNotFoundError(\"No module named 'torch'\")\n"
        "sys.meta_path.insert(0, _Refuse())\n")
    # A link, as a virtual environment's python is: sys.executable keeps its path.
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    python = tmp_path / "venv" / "bin" / "python3"
    python.symlink_to(sys.executable)
    env = dict(os.environ, PYTHONPATH=f"{site}:{HERE}", VIRTUAL_ENV=str(tmp_path / "venv"))
    r = subprocess.run([cli, "check", "--python", "sa_test_kernels:good", *ARGS],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "No module named 'torch'" in lines[0] and str(python) in lines[0], lines[0]

