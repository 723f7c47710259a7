"""A counterexample's input as a ready-to-paste torch.tensor literal."""

import re

_VALUES = re.compile(r"values=\[([^\]]*)\]")
_TORCH = {"float32": "torch.float32", "bfloat16": "torch.bfloat16", "float16": "torch.float16"}


def _number(s):
    s = s.strip()
    low = s.lower()
    if low in ("inf", "+inf", "infinity"):
        return 'float("inf")'
    if low in ("-inf", "-infinity"):
        return 'float("-inf")'
    if low in ("nan", "-nan"):
        return 'float("nan")'
    float(s)  # raises on anything else
    return s


def tensor_literal(text, dtype):
    """torch.tensor([[...]], dtype=...) for the rows in `values=[a, b | c, d]`, or None
    when the text holds no complete value list (a long row is shown abridged)."""
    m = _VALUES.search(text or "")
    if not m or "more;" in m.group(1) or dtype not in _TORCH:
        return None
    try:
        rows = [[_number(x) for x in r.split(",") if x.strip()] for r in m.group(1).split("|")]
    except ValueError:
        return None
    rows = [r for r in rows if r]
    if not rows:
        return None
    body = ", ".join("[" + ", ".join(r) + "]" for r in rows)
    if len({len(r) for r in rows}) != 1:  # ragged: one tensor per row
        return "[" + ", ".join(f"torch.tensor([{', '.join(r)}], dtype={_TORCH[dtype]})"
                               for r in rows) + "]"
    return f"torch.tensor([{body}], dtype={_TORCH[dtype]})"
