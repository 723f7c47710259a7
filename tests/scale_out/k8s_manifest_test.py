#!/usr/bin/env python3
"""Checks examples/scale-out/k8s-*.yaml offline (issue 34): no cluster and no
copy of the Kubernetes schema here, so the fields a sharded sweep depends on
are checked instead: batch/v1 Jobs; the sweep Job Indexed, restartPolicy
Never, its --shard-count equal to .spec.completions (a mismatch would make
every pod a shard of another split), parallelism <= completions, the pod
failure policy's rules well-formed; softmax-audit started with exec (so that
it gets the SIGTERM); both Jobs on one volume claim, the merge Job reading the
shard folders the sweep Job writes. Exit 77 without python3-yaml.

    k8s_manifest_test.py REPO
"""
import re
import sys

try:
    import yaml
except ImportError:
    print("SKIP: python3-yaml is not installed")
    sys.exit(77)

repo = sys.argv[1]
errors = []


def check(ok, what):
    if not ok:
        errors.append(what)


def load(name):
    with open(f"{repo}/examples/scale-out/{name}") as f:
        docs = [d for d in yaml.safe_load_all(f) if d is not None]
    check(len(docs) == 1, f"{name}: expected one document, found {len(docs)}")
    d = docs[0]
    check(d.get("apiVersion") == "batch/v1" and d.get("kind") == "Job", f"{name}: not a batch/v1 Job")
    return d


sweep = load("k8s-indexed-job.yaml")
merge = load("k8s-merge-job.yaml")
spec = sweep["spec"]
check(spec.get("completionMode") == "Indexed", "sweep Job: completionMode is not Indexed")
completions = spec.get("completions")
check(isinstance(completions, int) and completions >= 1, "sweep Job: completions is not a count")
check(spec.get("parallelism", 1) <= completions, "sweep Job: parallelism above completions")
pod = spec["template"]["spec"]
check(pod.get("restartPolicy") == "Never", "sweep Job: restartPolicy must be Never (podFailurePolicy)")
for rule in spec.get("podFailurePolicy", {}).get("rules", []):
    check(rule.get("action") in ("Count", "FailJob", "Ignore", "FailIndex"), f"bad action {rule}")
    check(("onExitCodes" in rule) != ("onPodConditions" in rule), f"rule needs one pattern: {rule}")
    for c in rule.get("onPodConditions", []):
        check(set(c) <= {"type", "status"} and "type" in c, f"bad pod condition {c}")
(container,) = pod["containers"]
command = " ".join(container.get("command", []) + container.get("args", []))
check(re.search(r"\bexec softmax-audit sweep\b", command) is not None,
      "sweep Job: softmax-audit is not started with exec (it would not get the SIGTERM)")
m = re.search(r"--shard-count (\d+)", command)
check(m is not None and int(m.group(1)) == completions,
      f"sweep Job: --shard-count {m.group(1) if m else 'missing'} differs from completions {completions}")
m = re.search(r"--out (\S+)-\$JOB_COMPLETION_INDEX", command)
check(m is not None, "sweep Job: --out does not name the shard folder by $JOB_COMPLETION_INDEX")
mpod = merge["spec"]["template"]["spec"]
mcommand = " ".join(mpod["containers"][0].get("command", []) + mpod["containers"][0].get("args", []))
check(m is not None and f"{m.group(1)}-*" in mcommand, "merge Job does not read the sweep Job's shard folders")
claims = [[v["persistentVolumeClaim"]["claimName"] for v in p["volumes"]] for p in (pod, mpod)]
check(claims[0] == claims[1], f"the Jobs use different volumes: {claims}")

for e in errors:
    print("FAIL:", e)
print("k8s_manifest_test:", "all passed" if not errors else f"{len(errors)} failed")
sys.exit(1 if errors else 0)
