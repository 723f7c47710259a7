#!/usr/bin/env python3
"""Alternate several softmax_bench binaries (or one binary under several
environments) and report the minimum and median CPU time of each benchmark.
On a shared machine the minimum over alternated runs is the steadier figure.

  bench/alternate_bench.py FILTER ROUNDS name=path[:ENV=V,ENV=V] ...
  e.g. bench/alternate_bench.py 'softmax_f32/cpu/' 2 old=/tmp/sb_old new=build/bench/softmax_bench

SA_CPU_MAX_ISA defaults to AVX2 (give SA_CPU_MAX_ISA=AVX512 per binary to
override); each run is --benchmark_repetitions=3 --benchmark_min_time=0.05.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

filt, rounds = sys.argv[1], int(sys.argv[2])
bins = []
for a in sys.argv[3:]:
    name, rest = a.split('=', 1)
    path, *envs = rest.split(':')
    env = dict(os.environ)
    env.setdefault('SA_CPU_MAX_ISA', 'AVX2')
    for e in (envs[0].split(',') if envs else []):
        k, v = e.split('=', 1)
        env[k] = v
    bins.append((name, path, env))
res = {}
out_json = os.path.join(tempfile.mkdtemp(), 'out.json')
for _ in range(rounds):
    for name, path, env in bins:
        subprocess.run([path, '--benchmark_filter=' + filt, '--benchmark_min_time=0.05',
                        '--benchmark_repetitions=3', '--benchmark_out=' + out_json,
                        '--benchmark_out_format=json'],
                       env=env, capture_output=True, text=True, check=True)
        for b in json.load(open(out_json))['benchmarks']:
            if b.get('run_type') != 'iteration':
                continue
            t = b['cpu_time'] * {'us': 1, 'ms': 1e3, 'ns': 1e-3, 's': 1e6}[b['time_unit']]
            res.setdefault((name, b['run_name']), []).append(t)
names = [b[0] for b in bins]
runs = sorted({k[1] for k in res},
              key=lambda s: [int(p) if p.isdigit() else p for p in s.split('/')])
print('%-42s' % 'benchmark (CPU us: min / median)' + ''.join('%24s' % n for n in names))
for rn in runs:
    row = '%-42s' % rn
    for n in names:
        v = res.get((n, rn))
        row += '%24s' % ('%.1f / %.1f' % (min(v), statistics.median(v)) if v else '-')
    print(row)
