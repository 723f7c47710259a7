"""examples/python: a small kernel passes; a broken one fails with a shrunk counterexample."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EX = os.path.join(ROOT, "examples", "python")


def run(name):
    return subprocess.run([sys.executable, os.path.join(EX, name)], capture_output=True,
                          text=True, timeout=300)


def test_small_kernel_passes():
    with open(os.path.join(EX, "small_kernel.py")) as f:
        assert len(f.read().splitlines()) < 10
    r = run("small_kernel.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert ": pass" in r.stdout


def test_broken_kernel_fails_with_a_shrunk_counterexample():
    r = run("broken_kernel.py")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "[fail]" in r.stdout and "shrunk" in r.stdout, r.stdout
    assert "as a tensor: torch.tensor(" in r.stdout, r.stdout
