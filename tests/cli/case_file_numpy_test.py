"""Case files through numpy (issue 35): numpy.load reads what `check` wrote
(inputs, got and expected values, case.json), and `replay` reads a case file
whose .npy members numpy itself wrote, reproducing the same numbers.

    python3 case_file_numpy_test.py CLI CASE.npz BROKEN_LIB WORKDIR
CASE.npz: the attention case tests/cli/replay_test.sh leaves behind."""
import io
import json
import os
import subprocess
import sys
import zipfile

import numpy as np

cli, case, broken, work = sys.argv[1:5]
os.makedirs(work, exist_ok=True)

with np.load(case, allow_pickle=False) as z:
    names = set(z.files)
    meta = json.loads(bytes(z["case.json"]).decode())
    call = meta["calls"][0]
    a = call["args"]
    q, k, v = z["q"], z["k"], z["v"]
    assert q.dtype == np.float32 and q.shape == (a["batch"] * a["seqlen_q"], a["heads_q"],
                                                  a["head_dim"]), (q.shape, a)
    assert k.shape == (a["batch"] * a["seqlen_k"], a["heads_kv"], a["head_dim"]), k.shape
    assert v.shape == (a["batch"] * a["seqlen_k"], a["heads_kv"], a["head_dim_v"]), v.shape
    got, expected = z["got_lse"], z["expected_lse"]
    # The broken kernel's lse is -inf; the exact one is finite.
    assert np.all(np.isneginf(got)), got
    assert np.all(np.isfinite(expected)), expected
    assert call["inputs"]["q"] == "q" and call["got"]["lse"] == "got_lse"
    assert meta["verdict"]["property"] == "attention_v2.rounding", meta["verdict"]
    # Every array case.json names is in the archive, and nothing else but case.json.
    named = {n for g in ("inputs", "got", "expected") for n in call.get(g, {}).values()}
    assert names == named | {"case.json"}, (names, named)
    arrays = {n: z[n] for n in named}
    meta_bytes = bytes(z["case.json"])

# The same case with every .npy written by numpy (np.save), zipped stored:
# replay reads it and reproduces the recorded numbers.
again = os.path.join(work, "numpy-written.npz")
with zipfile.ZipFile(again, "w", compression=zipfile.ZIP_STORED) as out:
    for n, arr in arrays.items():
        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=False)
        out.writestr(n + ".npy", buf.getvalue())
    out.writestr("case.json", meta_bytes)
r = subprocess.run([cli, "replay", again, "--plugin", broken], capture_output=True, text=True,
                   timeout=120)
assert r.returncode == 1, r.stdout + r.stderr
assert "recorded -inf (inf ulp)" in r.stdout and "CHANGED" not in r.stdout, r.stdout

# numpy.savez_compressed: a deflated archive is refused in one line (exit 2).
comp = os.path.join(work, "compressed.npz")
np.savez_compressed(comp, **arrays)
with zipfile.ZipFile(comp, "a", compression=zipfile.ZIP_DEFLATED) as out:
    out.writestr("case.json", meta_bytes)
r = subprocess.run([cli, "replay", comp, "--plugin", broken], capture_output=True, text=True,
                   timeout=60)
assert r.returncode == 2 and "compressed" in r.stderr and r.stdout == "", (r.returncode, r.stderr)
assert len(r.stderr.strip().splitlines()) == 1, r.stderr
print("case file through numpy: ok")
