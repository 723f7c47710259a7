"""softmax-audit replay --python (issue 35): a failing attention_backward call and a failing
softmax_backward call of a Python kernel, written by check as case files, rerun in a kernel
host. About 25 s (interpreters importing torch): label long."""
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cli, *args, timeout=120):
    env = dict(os.environ)
    env["PYTHONPATH"] = HERE  # where sa_test_kernels is; the CLI adds the package itself
    return subprocess.run([cli, "check", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)



BWD_SPEC = """
ops = ["attention_v2", "attention_backward"]
dtypes = ["float32"]
properties = ["attention_backward.rounding"]
cases = 4
seed = 3
[attention]
lengths = [[3, 4]]
head_dims = [4]
gqa_ratios = [2]
"""


def replay(cli, *args):
    env = dict(os.environ)
    env["PYTHONPATH"] = HERE
    return subprocess.run([cli, "replay", *args], capture_output=True, text=True, env=env,
                          timeout=120)


def test_replay_reruns_a_python_kernels_failing_backward_call(cli, tmp_path):
    # check writes the failing attention_backward call beside --json; replay --python
    # reruns it in a kernel host: the GQA bug still fails with the same numbers, the
    # correct kernel passes the same call.
    p = tmp_path / "gate.toml"
    p.write_text(BWD_SPEC)
    r = run(cli, "--python", "sa_test_kernels:attention_dk_not_summed", "--spec", str(p),
            "--json", str(tmp_path / "r.json"))
    assert r.returncode == 1, r.stdout + r.stderr
    case = tmp_path / "r.cases" / "attention_backward.rounding.attention_backward.float32.npz"
    assert case.exists(), r.stdout + r.stderr
    bad = replay(cli, str(case), "--python", "sa_test_kernels:attention_dk_not_summed")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "STILL FAILS" in bad.stdout and "CHANGED" not in bad.stdout, bad.stdout
    assert " dk[" in bad.stdout, bad.stdout
    good = replay(cli, str(case), "--python", "sa_test_kernels:attention")
    assert good.returncode == 0, good.stdout + good.stderr
    assert "PASSES now" in good.stdout, good.stdout


def test_replay_reruns_a_python_kernels_failing_softmax_backward_call(cli, tmp_path):
    r = run(cli, "--python", "sa_test_kernels:row_backward_no_sum", "--property",
            "backward.rounding", "--dtype", "float32", "--cases", "10", "--seed", "2",
            "--json", str(tmp_path / "r.json"))
    assert r.returncode == 1, r.stdout + r.stderr
    case = tmp_path / "r.cases" / "backward.rounding.softmax_backward.float32.npz"
    assert case.exists(), r.stdout + r.stderr
    bad = replay(cli, str(case), "--python", "sa_test_kernels:row_backward_no_sum")
    assert bad.returncode == 1 and "CHANGED" not in bad.stdout, bad.stdout + bad.stderr
    assert " dx[" in bad.stdout, bad.stdout
    good = replay(cli, str(case), "--python", "sa_test_kernels:row_backward")
    assert good.returncode == 0 and "PASSES now" in good.stdout, good.stdout + good.stderr
