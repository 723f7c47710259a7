#!/usr/bin/env python3
"""Validates a softmax-audit JSON output against its schema in this folder.

    python3 docs/schema/validate.py SCHEMA.schema.json FILE.json

Uses python3-jsonschema (Debian). Exit 0 valid, 1 invalid (the first errors
printed), 2 usage. Files are parsed strictly: a bare NaN or Infinity (which
Python's json module would accept) is an error, since JSON has none.
"""
import json
import pathlib
import sys
import warnings

import jsonschema

# RefResolver: what Debian 12's python3-jsonschema (4.10) offers; newer ones warn.
warnings.filterwarnings("ignore", category=DeprecationWarning)


def reject_constant(name):
    raise ValueError(f"{name} is not JSON (non-finite numbers are written as strings)")


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    schema_path = pathlib.Path(argv[1]).resolve()
    schema = json.loads(schema_path.read_text())
    try:
        doc = json.loads(pathlib.Path(argv[2]).read_text(), parse_constant=reject_constant)
    except ValueError as e:
        print(f"{argv[2]}: {e}")
        return 1
    store = {}
    for p in schema_path.parent.glob("*.schema.json"):
        s = json.loads(p.read_text())
        store[s["$id"]] = s
    resolver = jsonschema.RefResolver.from_schema(schema, store=store)
    validator = jsonschema.Draft7Validator(schema, resolver=resolver)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    for e in errors[:10]:
        print(f"{argv[2]}: at /{'/'.join(map(str, e.path))}: {e.message}")
    if errors:
        return 1
    print(f"{argv[2]}: valid against {schema_path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
