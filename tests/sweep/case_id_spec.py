#!/usr/bin/env python3
"""An implementation of the case-id specification (docs/scale-out.md, "Case
ids") independent of core/case_id.hpp: it computed the known ids and row
seeds that tests/sweep/case_id_test.cpp checks. Run with the test file's path,
it checks that every value it computes is in that file (exit 1 if not).

    case_id_spec.py [tests/sweep/case_id_test.cpp]
"""
import struct
import sys

M = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)


def hash_bytes(b):
    h = len(b)
    for i in range(0, len(b), 8):
        w = int.from_bytes(b[i:i + 8].ljust(8, b"\0"), "little")
        h = mix(((h ^ w) + GAMMA) & M)
    return mix((h + GAMMA) & M)


def s(t):
    t = t.encode()
    return b"s" + struct.pack("<Q", len(t)) + t


def u(v):
    return b"u" + struct.pack("<Q", v & M)


def d(x):
    return b"d" + struct.pack("<d", x)


def v(ext):
    return b"v" + struct.pack("<Q", len(ext)) + b"".join(struct.pack("<Q", e & M) for e in ext)


def case_id(kernel, op, dtype, shape, dist, theta, level, seed, index):
    return hash_bytes(s("softmax-audit case v1") + s(kernel) + s(op) + s(dtype) + v(shape) +
                      s(dist) + d(theta) + u(level) + u(seed) + u(index))


def row_seed(seed, n, dist):
    return hash_bytes(s("softmax-audit sweep row v1") + u(seed) + u(n) + s(dist))


values = [mix(1), mix(0x0123456789ABCDEF), hash_bytes(b""), hash_bytes(b"a"),
          hash_bytes(b"12345678"), hash_bytes(b"123456789")]
cases = [("builtin:cpu", "sweep", "float32", [16], "gaussian", 1.0, 1, 1, 0),
         ("builtin:naive", "sweep", "bfloat16", [1 << 24], "fa3_outliers", 0.5, 2, M, 0),
         ("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", "softmax", "float16",
          [4, 1000], "spike", 2.0, 1, 42, 7),
         ("builtin:cpu", "sweep", "float32", [31], "uniform", 1.0, -1, 0, 0),
         ("caf\u00e9", "entropy", "float32", [], "", 1e-300, 0, 7, 123456789)]
values += [case_id(*c) for c in cases]
values += [row_seed(*r) for r in [(1, 16, "gaussian"), (1, 49, "spike"), (0, 1 << 30, "uniform"),
                                  (M, 1, "fa3_outliers")]]
for x in values:
    print(x)
if len(sys.argv) > 1:
    text = open(sys.argv[1]).read()
    missing = [x for x in values if f"{x}ull" not in text]
    for x in missing:
        print(f"FAIL: {x} is not in {sys.argv[1]}")
    print("case_id_spec:", "all values found" if not missing else f"{len(missing)} missing")
    sys.exit(1 if missing else 0)
