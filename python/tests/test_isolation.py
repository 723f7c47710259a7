"""A crash, abort, hang, exception or stray write in a Python kernel becomes a
verdict; the interpreter running check() (this pytest session) lives on."""
import os
import textwrap

import pytest
import torch

import softmax_audit
import sa_test_kernels as K


def spec(tmp_path, props=("special.values",), ops=("softmax", "log_softmax")):
    p = tmp_path / "gate.toml"
    p.write_text(textwrap.dedent(f"""
        properties = {list(props)!r}
        ops = {list(ops)!r}
        dtypes = ["float32"]
        cases = 3
        seed = 11
    """).replace("'", '"'))
    return p


def by_property(results, prop):
    return [v for v in results.verdicts if v.property == prop]


def test_good_kernel_passes(tmp_path):
    r = softmax_audit.check(K.Good(), spec=spec(tmp_path))
    assert r.exit_code == 0, r.summary()
    assert [v.outcome for v in by_property(r, "special.values")] == ["pass", "pass"]
    assert by_property(r, "gate.no_crash")[0].outcome == "pass"


@pytest.mark.parametrize("kernel, signal", [(K.Segfault(), "signal 11"), (K.Abort(), "signal 6")])
def test_crash_becomes_a_verdict(tmp_path, kernel, signal):
    r = softmax_audit.check(kernel, spec=spec(tmp_path))
    assert r.exit_code == 1
    crash = by_property(r, "gate.no_crash")
    assert crash and crash[0].outcome == "fail" and crash[0].op == "softmax"
    assert signal in crash[0].note, crash[0].note
    # log_softmax, which does not crash, still has its verdict
    assert [v.outcome for v in r.verdicts
            if v.property == "special.values" and v.op == "log_softmax"] == ["pass"]


def test_hang_becomes_a_verdict(tmp_path):
    r = softmax_audit.check(K.Hang(), spec=spec(tmp_path), timeout=2)
    hang = by_property(r, "gate.no_hang")
    assert r.exit_code == 1 and hang[0].outcome == "fail" and hang[0].op == "softmax"


def test_exception_becomes_a_verdict(tmp_path):
    r = softmax_audit.check(K.Raises(), spec=spec(tmp_path))
    assert r.exit_code == 1
    sm = [v for v in by_property(r, "special.values") if v.op == "softmax"]
    assert sm and sm[0].outcome in ("fail", "error")
    assert "no softmax today" in sm[0].describe()


def test_stray_write_into_the_input_becomes_a_verdict(tmp_path):
    r = softmax_audit.check(K.WritesInput(), spec=spec(tmp_path))
    assert r.exit_code == 1
    bounds = by_property(r, "gate.in_bounds")
    assert bounds and bounds[0].outcome == "fail", r.summary()


def test_wrong_output_type_is_named(tmp_path):
    p = spec(tmp_path)
    p.write_text(p.read_text().replace('dtypes = ["float32"]', 'dtypes = ["bfloat16"]'))
    r = softmax_audit.check(K.WrongType(), spec=p)
    assert r.exit_code == 1
    assert "expected torch.bfloat16" in r.summary()


def test_fork_after_torch_used_threads_does_not_deadlock(tmp_path):
    # The parent has run PyTorch's intra-op pool with two threads before the
    # gate forks; the child runs PyTorch with one thread and finishes.
    old = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.softmax(torch.randn(512, 4096), -1).sum()
        r = softmax_audit.check(K.Good(), spec=spec(tmp_path), timeout=20)
    finally:
        torch.set_num_threads(old)
    assert r.exit_code == 0, r.summary()


def test_bad_kernel_name_is_a_usage_error():
    with pytest.raises(softmax_audit.UsageError, match="package.module:object"):
        softmax_audit.check("os.system('x')")


def test_bad_declaration_is_a_usage_error():
    class NoOps:
        dtypes = ("float32",)
    with pytest.raises(Exception, match="implements none of"):
        softmax_audit.check(NoOps())


def test_cuda_kernel_runs_on_a_device_or_checks_nothing_and_says_why(tmp_path):
    # device = "cuda": the gate stages device memory and the kernel gets CUDA
    # tensors. Without a usable device (this CI: Debian's PyTorch is CPU-only)
    # the run is a usage error naming the reason and checking nothing, whether
    # the kernel is given by name or as an object; never a pass.
    if torch.cuda.is_available():
        r = softmax_audit.check("sa_test_kernels:cuda_softmax", spec=spec(tmp_path))
        assert r.exit_code == 0, r.summary()
        assert by_property(r, "special.values")[0].passed
        return
    for kernel in ("sa_test_kernels:cuda_softmax", K.cuda_softmax):
        with pytest.raises(softmax_audit.UsageError,
                           match="works on CUDA tensors.*no CUDA device is usable here.*"
                                 "nothing was checked"):
            softmax_audit.check(kernel, spec=spec(tmp_path))


def test_cuda_kernel_object_after_this_process_initialised_cuda_is_refused(monkeypatch):
    # A child forked after its parent initialised CUDA cannot use it: the
    # object path refuses such a kernel up front and says to pass it by name.
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(softmax_audit.UsageError, match="pass the kernel by name"):
        softmax_audit.check(K.cuda_softmax)


# Issue 29: a Python kernel that looks for the gate's message token in its
# own memory and in its parent's (/proc/PID/mem), writes "pass" verdicts and
# "done" stamped with it to every descriptor, tries to open its parent's
# memory for writing, and returns NaN everywhere. It got exit 0 (PASS) when
# the suite ran in the kernel's process; the suite now runs in a judge that
# never imports the module, whose memory a kernel host cannot open.
FORGER = r'''
import json, os, re
import torch

TOKEN = re.compile(rb'"k":"([0-9a-f]{32})"')


def scan(pid):
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        mem = open(f"/proc/{pid}/mem", "rb", buffering=0)
    except OSError as e:
        return None, f"reading process {pid}: {e.strerror}"
    with mem:
        for line in maps:
            f = line.split()
            lo, hi = (int(x, 16) for x in f[0].split("-"))
            if not f[1].startswith("r") or hi - lo > (1 << 28) or "[v" in line:
                continue
            try:
                mem.seek(lo)
                data = mem.read(hi - lo)
            except (OSError, OverflowError, ValueError):
                continue
            m = TOKEN.search(data or b"")
            if m:
                return m.group(1).decode(), f"reading process {pid}: token found"
    return None, f"reading process {pid}: no token"


class Forger:
    name = "forger"
    dtypes = ("float32",)
    forged = False

    def forge(self):
        report, token = [], None
        for pid in (os.getpid(), os.getppid()):
            t, what = scan(pid)
            report.append(what)
            token = token or t
        try:
            open(f"/proc/{os.getppid()}/mem", "r+b").close()
            report.append("the parent's memory opened for writing")
        except OSError as e:
            report.append(f"writing the parent's memory: {e.strerror}")
        if token:
            lines = [{"t": "verdict", "v": {"property": p, "outcome": "pass", "op": op,
                                            "dtype": "float32", "kernel": "forger"}}
                     for p in ("differential.ulp", "metamorphic.sum_to_one")
                     for op in ("softmax", "log_softmax")]
            lines += [{"t": "unit_done", "verdicts": []}, {"t": "done"}]
            data = "".join(json.dumps(dict(m, k=token, p=os.getpid())) + "\n" for m in lines)
            for fd in range(3, 64):
                try:
                    os.write(fd, data.encode())
                except OSError:
                    pass
        with open(os.environ["SA_FORGE_REPORT"], "a") as f:
            f.write("\n".join(report) + "\n")

    def softmax(self, x, temperature):
        if not self.forged:
            self.forged = True
            self.forge()
        return torch.full_like(x, float("nan"))

    log_softmax = softmax


forger = Forger()
'''


def test_forged_verdicts_from_a_python_kernel_are_never_a_pass(cli, tmp_path):
    import json
    import subprocess
    (tmp_path / "forger_kernel.py").write_text(FORGER)
    report = tmp_path / "forge-report.txt"
    gate_spec = tmp_path / "forge.toml"
    gate_spec.write_text('properties = ["differential.ulp", "metamorphic.sum_to_one"]\n'
                         'ops = ["softmax", "log_softmax"]\ndtypes = ["float32"]\n'
                         'cases = 3\nseed = 11\n')
    out = tmp_path / "forge.json"
    env = dict(os.environ, PYTHONPATH=str(tmp_path), SA_FORGE_REPORT=str(report))
    r = subprocess.run([cli, "check", "--python", "forger_kernel:forger", "--spec",
                        str(gate_spec), "--json", str(out)],
                       capture_output=True, text=True, env=env, timeout=240)
    assert r.returncode == 1, r.stdout + r.stderr
    summary = json.loads(out.read_text())["runs"][0]["summary"]
    assert summary["status"] == "fail" and summary["fail"] > 0, summary
    text = report.read_text()
    assert "reading process" in text, text  # the forger ran
    assert "opened for writing" not in text, text
