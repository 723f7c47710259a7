"""How a Python kernel is presented to the suite (called from _core's sa_kernel slots).

A kernel is any object (an instance, a class, or a module of functions) with
methods named after the operations it implements, and a declaration:

    name          str (default: the type's or module's name)
    description   str (default: the first line of its docstring)
    dtypes        element types it takes: "float32", "bfloat16", "float16"
                  (or torch dtypes); default ("float32",)
    op_dtypes     optional {op: dtypes} overriding `dtypes` for some ops
    tensors       "torch" (default) or "numpy" (float32 and float16 only)
    attention_features  names among ATTENTION_FEATURES (attention only)
    max_n         the largest row length (0: none)
    deterministic True if identical calls give identical bits

Operations, each taking and returning tensors of the input's element type on
the CPU (kernel.h's semantics: masks are -inf logits, a fully masked row has
weights 0, log-softmax -inf, lse -inf, entropy 0; NaN anywhere gives a NaN row):

    softmax(x, temperature)          x: [rows, n] -> [rows, n]
    log_softmax(x, temperature)      -> [rows, n]
    logsumexp(x, temperature)        -> [rows] (any float type; stored as float32)
    entropy(x, temperature)          -> [rows], or ([rows], [rows, 3] (m, S, T) state)
    softmax_backward(y, dy, temperature)      -> dx [rows, n]
    log_softmax_backward(y, dy, temperature)  -> dx [rows, n]
    attention(q, k, v, *, scale, causal, alignment, key_padding_mask)
        q [B, Hq, Sq, D], k [B, Hkv, Sk, D], v [B, Hkv, Sk, Dv] (views with any
        strides); returns out [B, Hq, Sq, Dv] or (out, lse [B, Hq, Sq]).
        causal: query i sees key j iff j <= i + off, off = Sk - Sq for
        alignment "bottom_right" and 0 for "top_left"; key_padding_mask is
        None or a bool [B, Sk] tensor (False masks the key).
        Declared features add keywords, passed only when a case uses them
        (kernel.h's order: s = scale q.k, softcap, ALiBi, then the masks):
          window=(left, right)   "window": query i sees keys
                                 i + off - left <= j <= i + off + right
                                 (-1: unbounded side; with causal, right
                                 is -1 and causal bounds it)
          softcap=c              "softcap": s -> c tanh(s / c)
          alibi_slopes=[Hq]      "alibi": s -> s - slope_h |i + off - j|
          sinks=[Hq]             "sinks": one more logit per head that joins
                                 the max and the denominator (and lse) but
                                 has no value
        (float32 tensors / arrays of Hq values).
    attention_backward(q, k, v, out, dout, lse, *, scale, causal, alignment,
                       key_padding_mask, <the same feature keywords>)
        out, dout [B, Hq, Sq, Dv] in the input type, lse [B, Hq, Sq] float32
        (as the forward produced them); returns (dq, dk, dv) in q's, k's and
        v's shapes and the input type, or (dq, dk, dv, dsinks [Hq]) when
        sinks are used (kernel.h, sa_attention_backward_args: GQA's dk, dv
        sum over the query heads of a key/value head).

Inputs are read-only views of the gate's own buffers (no copy); results are
copied into the gate's output buffers after a check of their type and shape.
"""

import importlib
import sys
import warnings

DTYPES = ("float32", "bfloat16", "float16")
OPS = ("softmax", "log_softmax", "logsumexp", "entropy", "softmax_backward",
       "log_softmax_backward", "attention", "attention_backward")
# kernel.h's SA_ATTN_* bits the Python attention signature can carry.
ATTENTION_FEATURES = {"batched": 1 << 0, "gqa": 1 << 1, "strided": 1 << 3, "causal": 1 << 4,
                      "window": 1 << 5, "softcap": 1 << 6, "alibi": 1 << 7, "sinks": 1 << 8,
                      "key_padding": 1 << 9, "lse": 1 << 10, "unequal_head_dims": 1 << 14}


_forked = False


class Unsupported(Exception):
    """Raised by a kernel (or the adapter) for a case it does not implement: SA_UNSUPPORTED."""


def load(name):
    """package.module:object -> the object (the name was validated by the caller)."""
    module, _, attr = name.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _limit_threads():
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != 1:
        torch.set_num_threads(1)


def prepare_process(forked):
    """Called in each process before its first kernel call."""
    # Inputs are read-only views; torch.from_numpy warns about that once per process.
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    global _forked
    _forked = bool(forked)
    if forked:
        # PyTorch's OpenMP pool does not survive fork: one thread in the child
        # (also for a torch imported later, by the kernel's module: Caller).
        _limit_threads()


def _dtype_name(t):
    s = str(t)
    s = s[len("torch."):] if s.startswith("torch.") else s
    aliases = {"float": "float32", "half": "float16", "bf16": "bfloat16", "f32": "float32",
               "f16": "float16"}
    s = aliases.get(s, s)
    if s not in DTYPES:
        raise ValueError(f"dtype {t!r}: expected one of {', '.join(DTYPES)}")
    return s


class Caller:
    def __init__(self, kernel):
        self.kernel = kernel
        self.tensors = getattr(kernel, "tensors", "torch")
        if self.tensors not in ("torch", "numpy"):
            raise ValueError(f"tensors = {self.tensors!r}: expected 'torch' or 'numpy'")
        device = str(getattr(kernel, "device", "cpu"))
        if device != "cpu":
            raise ValueError(f"device = {device!r}: only 'cpu' Python kernels are supported "
                             "so far (CUDA tensors are not passed yet)")
        if self.tensors == "torch":
            import torch
            self.torch = torch
            if _forked:
                _limit_threads()
        else:
            import numpy
            self.np = numpy
        self.fns = {op: getattr(kernel, op) for op in OPS if callable(getattr(kernel, op, None))}
        if not self.fns:
            raise ValueError(f"{self._origin()} implements none of {', '.join(OPS)}")

    def _origin(self):
        k = self.kernel
        if isinstance(k, type(sys)):
            return k.__name__
        t = k if isinstance(k, type) else type(k)
        return f"{t.__module__}.{t.__qualname__}"

    def describe(self):
        k = self.kernel
        default_name = k.__name__ if isinstance(k, (type, type(sys))) else type(k).__name__
        name = str(getattr(k, "name", default_name))
        doc = (getattr(k, "__doc__", None) or "").strip().splitlines()
        description = str(getattr(k, "description", doc[0] if doc else ""))
        dtypes = [_dtype_name(t) for t in getattr(k, "dtypes", ("float32",))]
        per_op = dict(getattr(k, "op_dtypes", {}) or {})
        for op in per_op:
            if op not in self.fns:
                raise ValueError(f"op_dtypes names {op!r}, which the kernel does not implement")
        op_dtypes = {}
        for op in self.fns:
            ts = [_dtype_name(t) for t in per_op.get(op, dtypes)]
            if self.tensors == "numpy" and "bfloat16" in ts:
                raise ValueError("a NumPy kernel cannot take bfloat16 (NumPy has no such type); "
                                 "use tensors = 'torch'")
            op_dtypes[op] = ts
        feats = 0
        for f in getattr(k, "attention_features", ()) or ():
            if f not in ATTENTION_FEATURES:
                raise ValueError(f"attention feature {f!r}: expected some of "
                                 f"{', '.join(ATTENTION_FEATURES)}")
            feats |= ATTENTION_FEATURES[f]
        return {"name": name, "description": description, "origin": self._origin(),
                "op_dtypes": op_dtypes, "max_n": int(getattr(k, "max_n", 0) or 0),
                "attention_features": feats,
                "deterministic": bool(getattr(k, "deterministic", False))}

    # ---- buffers ----
    def _view(self, a, dt):
        if self.tensors == "numpy":
            return a
        if dt == "bfloat16":  # the bits arrive as uint16, which torch.from_numpy refuses
            return self.torch.from_numpy(a.view("int16")).view(self.torch.bfloat16)
        return self.torch.from_numpy(a)

    def _store(self, out, res, dt, what):
        if self.tensors == "numpy":
            np = self.np
            if not isinstance(res, np.ndarray):
                raise TypeError(f"{what} returned {type(res).__name__}, expected a numpy.ndarray")
            if res.dtype != out.dtype:
                raise TypeError(f"{what} returned {res.dtype} for {dt} input; expected {dt} "
                                "(kernel.h: the output has the input's type)")
            if res.shape != out.shape:
                raise ValueError(f"{what} returned shape {res.shape}, expected {out.shape}")
            np.copyto(out, res)
            return
        torch = self.torch
        if not isinstance(res, torch.Tensor):
            raise TypeError(f"{what} returned {type(res).__name__}, expected a torch.Tensor")
        o = self._view(out, dt)
        if res.dtype != o.dtype:
            raise TypeError(f"{what} returned {res.dtype} for {dt} input; expected {o.dtype} "
                            "(kernel.h: the output has the input's type)")
        if tuple(res.shape) != tuple(o.shape):
            raise ValueError(f"{what} returned shape {tuple(res.shape)}, expected "
                             f"{tuple(o.shape)}")
        if res.device.type != "cpu":
            raise ValueError(f"{what} returned a tensor on {res.device}, expected cpu")
        o.copy_(res)

    def _store_floats(self, out, res, what):
        """Per-row float outputs (lse, entropy, state): any float type, stored as float32."""
        if self.tensors == "numpy":
            res = self.np.asarray(res)
            if res.dtype.kind != "f":
                raise TypeError(f"{what} returned {res.dtype}, expected a floating type")
            if res.size != out.size:
                raise ValueError(f"{what} returned {res.size} values, expected {out.size}")
            out[...] = res.reshape(out.shape)
            return
        torch = self.torch
        if not isinstance(res, torch.Tensor) or not res.is_floating_point():
            raise TypeError(f"{what} returned {type(res).__name__} "
                            f"{getattr(res, 'dtype', '')}, expected a floating torch.Tensor")
        if res.numel() != out.size:
            raise ValueError(f"{what} returned {res.numel()} values, expected {out.size}")
        torch.from_numpy(out).copy_(res.reshape(out.shape))

    # ---- the slots ----
    def rows(self, op, dt, x, out, temperature):
        res = self.fns[op](self._view(x, dt), temperature)
        self._store(out, res, dt, op)

    def reduce(self, op, dt, x, out, temperature, state):
        res = self.fns[op](self._view(x, dt), temperature)
        st = None
        if isinstance(res, tuple):
            res, st = res
        if state is not None:
            if st is None:
                raise Unsupported(f"{op}: the (m, S, T) state was asked for and the kernel "
                                  "returns only the entropy")
            self._store_floats(state, st, op + " state")
        self._store_floats(out, res, op)

    def backward(self, op, dt, y, dy, dx, temperature):
        res = self.fns[op](self._view(y, dt), self._view(dy, dt), temperature)
        self._store(dx, res, dt, op)

    def _mask(self, mask):
        if mask is None:
            return None
        return (self.torch.from_numpy(mask) != 0) if self.tensors == "torch" else mask != 0

    def _features(self, kw):
        """The feature keywords in use: heads-long arrays as the kernel's tensor type."""
        if self.tensors == "torch":
            kw = {k: (self.torch.from_numpy(v) if k in ("alibi_slopes", "sinks") else v)
                  for k, v in kw.items()}
        return dict(kw)

    def attention(self, dt, q, k, v, out, lse, mask, scale, causal, alignment, features):
        res = self.fns["attention"](self._view(q, dt), self._view(k, dt), self._view(v, dt),
                                    scale=scale, causal=causal, alignment=alignment,
                                    key_padding_mask=self._mask(mask),
                                    **self._features(features))
        got_lse = None
        if isinstance(res, tuple):
            res, got_lse = res
        if lse is not None:
            if got_lse is None:
                raise Unsupported("attention: lse was asked for and the kernel returns only out")
            self._store_floats(lse, got_lse, "attention lse")
        self._store(out, res, dt, "attention")

    def attention_backward(self, dt, q, k, v, out, dout, lse, dq, dk, dv, dsinks, mask, scale,
                           causal, alignment, features):
        lse_t = self.torch.from_numpy(lse) if self.tensors == "torch" else lse
        res = self.fns["attention_backward"](
            self._view(q, dt), self._view(k, dt), self._view(v, dt), self._view(out, dt),
            self._view(dout, dt), lse_t, scale=scale, causal=causal, alignment=alignment,
            key_padding_mask=self._mask(mask), **self._features(features))
        if not isinstance(res, tuple) or len(res) not in (3, 4):
            raise TypeError("attention_backward returned "
                            f"{type(res).__name__}, expected (dq, dk, dv) or (dq, dk, dv, dsinks)")
        self._store(dq, res[0], dt, "attention_backward dq")
        self._store(dk, res[1], dt, "attention_backward dk")
        self._store(dv, res[2], dt, "attention_backward dv")
        if dsinks is not None:
            if len(res) != 4:
                raise Unsupported("attention_backward: dsinks was asked for and the kernel "
                                  "returns only (dq, dk, dv)")
            self._store_floats(dsinks, res[3], "attention_backward dsinks")
