"""A counterexample's input as a ready-to-paste torch.tensor literal.

Row operations print `values=[a, b | c, d]` (rows separated by '|'); an
attention_v2 counterexample small enough to print inline (every tensor at
most 16 elements) prints `heads=HQ/HKV ... d=D dv=DV ... q=[...] k=[...]
v=[...]`, packed [rows][heads][dim] (rows of every sequence one after the
other; attention_backward's also dout, shaped like out). Both become
torch.tensor literals of that shape."""

import re

_VALUES = re.compile(r"values=\[([^\]]*)\]")
_TORCH = {"float32": "torch.float32", "bfloat16": "torch.bfloat16", "float16": "torch.float16"}
# fp8 inputs: exact float32 values converted (torch.tensor takes no fp8 dtype directly).
_FP8 = {"fp8_e4m3": "torch.float8_e4m3fn", "fp8_e5m2": "torch.float8_e5m2"}
_ATTN = {name: re.compile(r"(?:^|\s)" + name + r"=\[([^\]]*)\]")
         for name in ("q", "k", "v", "dout", "sinks", "alibi_slopes")}
_HEADS = re.compile(r"\bheads=(\d+)/(\d+)")
_DIM = {name: re.compile(r"\b" + name + r"=(\d+)\b") for name in ("d", "dv")}


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


def _nested(values, shape):
    """A flat list as nested lists of `shape` (C order), as literal text."""
    if len(shape) == 1:
        return "[" + ", ".join(values) + "]"
    step = len(values) // shape[0]
    return "[" + ", ".join(_nested(values[i * step:(i + 1) * step], shape[1:])
                           for i in range(shape[0])) + "]"


def attention_literal(text, dtype):
    """q = torch.tensor(...), k = ..., v = ... (one per line, shaped [rows][heads][dim])
    for an attention counterexample that prints its inputs, or None."""
    text = text or ""
    heads, d, dv = _HEADS.search(text), _DIM["d"].search(text), _DIM["dv"].search(text)
    if not heads or not d or not _ATTN["q"].search(text):
        return None
    if dtype in _TORCH:
        tail = f", dtype={_TORCH[dtype]})"
    elif dtype in _FP8:
        tail = f", dtype=torch.float32).to({_FP8[dtype]})"
    else:
        return None
    hq, hkv, d = int(heads.group(1)), int(heads.group(2)), int(d.group(1))
    dv = int(dv.group(1)) if dv else d
    lines = []
    for name, heads_n, dim in (("q", hq, d), ("k", hkv, d), ("v", hkv, dv)):
        m = _ATTN[name].search(text)
        if not m:
            return None
        try:
            vals = [_number(x) for x in m.group(1).split(",") if x.strip()]
        except ValueError:
            return None
        if not vals or len(vals) % (heads_n * dim):
            return None
        shape = (len(vals) // (heads_n * dim), heads_n, dim)
        lines.append(f"{name} = torch.tensor({_nested(vals, shape)}{tail}")
    m = _ATTN["dout"].search(text)  # attention_backward: dout has out's shape
    if m:
        try:
            vals = [_number(x) for x in m.group(1).split(",") if x.strip()]
        except ValueError:
            return None
        if not vals or len(vals) % (hq * dv):
            return None
        shape = (len(vals) // (hq * dv), hq, dv)
        out_type = _TORCH.get(dtype, "torch.float32")  # fp8 inputs: a wider out type
        lines.append(f"dout = torch.tensor({_nested(vals, shape)}, dtype={out_type})")
    for name in ("sinks", "alibi_slopes"):
        m = _ATTN[name].search(text)
        if m:
            try:
                vals = [_number(x) for x in m.group(1).split(",") if x.strip()]
            except ValueError:
                return None
            lines.append(f"{name} = torch.tensor([{', '.join(vals)}], dtype=torch.float32)")
    return "\n".join(lines)


def tensor_literal(text, dtype):
    """torch.tensor([[...]], dtype=...) for the rows in `values=[a, b | c, d]`; for an
    attention counterexample with its inputs inline, `q = torch.tensor(...)` and k, v
    (one per line); None when the text holds no complete value list (a long row is
    shown abridged, a large attention case not at all)."""
    if _VALUES.search(text or "") is None:
        return attention_literal(text, dtype)
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
