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
    attention_features_by_dtype  optional {dtype: names}: the features for
                  that input type where they differ (e.g. sinks in float16 only)
    attention_required  names among ATTENTION_FEATURES every call has, e.g.
                  ("causal",) for a causal-only kernel
    attention_only  names among ATTENTION_ONLY: "q_le_k" (seqlen_q <= seqlen_k),
                  "bottom_right" (no top-left alignment), "window_right_0"
    head_dim_multiple  head dims are multiples of this (e.g. 8); 0: any
    device        "cpu" (default) or "cuda": with "cuda" the gate stages every
                  buffer in device memory (in the kernel host process, never in
                  the judge) and the kernel gets and returns CUDA
                  tensors (torch only; kernel.h's SA_MEMORY_CUDA). Pass such a
                  kernel by name ("package.module:object", or the CLI's
                  --python), so that only the gate's child processes import it
                  and initialise CUDA (a child forked after its parent
                  initialised CUDA cannot use it). Where no device is usable the
                  run says so and checks nothing (exit 2, UsageError), never
                  passes.
    max_n         the largest row length (0: none)
    deterministic True if identical calls give identical bits
    conventions   names among CONVENTIONS (docs/conventions.md) the kernel
                  means to follow, e.g. ("ieee_special_values",) for
                  torch.softmax, whose fully masked rows are NaN: kernel.h's
                  SA_CAP_* flags, as a gate spec's `conventions` would declare
                  them (default: none)
    adaptive_entropy  "shannon" (default) or "paper_eps": which entropy drives
                  beta in adaptive_softmax (kernel.h, sa_entropy_definition)

Operations, each taking and returning tensors of the input's element type on
the kernel's device (kernel.h's semantics: masks are -inf logits, a fully masked row has
weights 0, log-softmax -inf, lse -inf, entropy 0; NaN anywhere gives a NaN row):

    softmax(x, temperature)          x: [rows, n] -> [rows, n]
    log_softmax(x, temperature)      -> [rows, n]
    logsumexp(x, temperature)        -> [rows] (any float type; stored as float32)
    entropy(x, temperature)          -> [rows], or ([rows], [rows, 3] (m, S, T) state)
    adaptive_softmax(x, temperature) -> out [rows, n], or (out, beta [rows],
        entropy [rows]) (docs/theory.md T5: H the entropy of softmax(x / theta),
        beta = 1 if H <= 0.5 else max(poly(H), 1), out = softmax(beta x / theta));
        the suite asks for beta and H in most cases
    softmax_backward(y, dy, temperature)      -> dx [rows, n]
    log_softmax_backward(y, dy, temperature)  -> dx [rows, n]
    merge_entropy_states(a, b)       a, b: [count, 3] float32 streamed states
        (m, S, T) -> [count, 3], their merge (docs/theory.md T6)
    merge_attention_states(outs, lses)
        split-KV merge of parts over disjoint key sets: outs a list of [rows, dv]
        float32 results (each normalised within its part), lses a list of
        [rows] float32 -> (out [rows, dv], lse [rows]); a part with lse -inf
        contributes nothing, every part -inf gives out 0, lse -inf. Serves the
        suite's two-part and n-part merges.
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
          cu_seqlens_q=[B+1], cu_seqlens_k=[B+1], max_seqlen_q, max_seqlen_k
                                 "varlen" (FlashAttention's varlen layout):
                                 sequences packed along the sequence
                                 dimension; q is [total_q, Hq, D], k and v
                                 [total_k, Hkv, D/Dv], out [total_q, Hq, Dv],
                                 lse [Hq, total_q], key_padding_mask [total_k];
                                 sequence b is rows cu[b] .. cu[b+1]-1 (int32
                                 offsets; empty sequences occur)
          seqused_k=[B]          "seqused_k" (FlashAttention's cache_seqlens):
                                 sequence b's keys are the first seqused_k[b]
                                 of its buffer (of Sk, or of its varlen
                                 rows); the rest must not be read (NaN)
          block_table=[B, W], page_size, max_seqlen_k
                                 "paged_kv" (forward only): k and v are page
                                 pools [num_pages, page_size, Hkv, D/Dv];
                                 key j of sequence b is slot j % page_size of
                                 page block_table[b, j // page_size] (int32);
                                 cu_seqlens_k then gives lengths only.
                                 torch_ops.forward_by_sequence answers both
                                 with dense calls
          attn_mask=[B, Hq, Sq, Sk]
                                 "attn_mask" (forward only): a key takes part
                                 where it is True (SDPA's boolean attn_mask)
          attn_bias=[B, Hq, Sq, Sk]
                                 "attn_bias" (forward only): float32 added to
                                 the score after softcap and ALiBi
          block_mask=[B, Hq, ceil(Sq/bq), ceil(Sk/bk)], block_size=(bq, bk)
                                 "block_mask" (forward only): FlexAttention's
                                 BlockMask; query i and key j take part where
                                 block_mask[.., i // bq, j // bk] is True
          tree_mask=[B, Hq, Sq, Sq]
                                 "tree_mask" (forward only): speculative
                                 decoding's tree over each sequence's last Sq
                                 keys: key j = Lk - Lq + t is masked for query
                                 i where tree_mask[.., i, t] is False
                                 Masks are indexed by each sequence's own
                                 query and key positions (with varlen too),
                                 broadcast dimensions have stride 0, and a
                                 masked position's bias, key and value are
                                 never to be read. All masks combine by AND.
        (float32 tensors / arrays of Hq values). torch_ops.forward_by_sequence
        and backward_by_sequence run a dense attention per sequence of a varlen
        call (what a reference kernel without a packed path can use).
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
OPS = ("softmax", "log_softmax", "logsumexp", "entropy", "adaptive_softmax", "softmax_backward",
       "log_softmax_backward", "merge_entropy_states", "merge_attention_states", "attention",
       "attention_backward")
# Operations on float32 states whatever the kernel's element types are.
FLOAT32_OPS = ("merge_entropy_states", "merge_attention_states")
ENTROPY_DEFINITIONS = ("shannon", "paper_eps")
# Declarable numerical conventions and their kernel.h SA_CAP_* bits: the
# suite's own table (properties/conventions.cpp), exported by _core.
from ._core import CONVENTIONS  # noqa: E402
# kernel.h's SA_ATTN_* bits the Python attention signature can carry.
ATTENTION_FEATURES = {"batched": 1 << 0, "gqa": 1 << 1, "varlen": 1 << 2, "strided": 1 << 3,
                      "causal": 1 << 4, "window": 1 << 5, "softcap": 1 << 6, "alibi": 1 << 7, "sinks": 1 << 8,
                      "key_padding": 1 << 9, "lse": 1 << 10, "unequal_head_dims": 1 << 14,
                      "paged_kv": 1 << 15, "seqused_k": 1 << 16, "attn_mask": 1 << 17,
                      "attn_bias": 1 << 18, "block_mask": 1 << 19, "tree_mask": 1 << 20}
# kernel.h's SA_ATTN_ONLY_* (sa_capabilities.attention_constraints).
ATTENTION_ONLY = {"q_le_k": 1 << 0, "bottom_right": 1 << 1, "window_right_0": 1 << 2}


_forked = False


class DeviceArray:
    """Device memory the gate staged for a CUDA kernel, as an object with
    __cuda_array_interface__ (version 2), which torch.as_tensor takes without a copy.
    Strides in bytes; bfloat16's bits travel as int16 (torch has no uint16)."""

    def __init__(self, ptr, shape, strides, typestr, readonly):
        self.shape = tuple(int(x) for x in shape)
        self.size = 1
        for x in self.shape:
            self.size *= x
        self.__cuda_array_interface__ = {
            "shape": self.shape, "strides": tuple(int(x) for x in strides),
            "typestr": "<i2" if typestr == "<u2" else typestr,
            "data": (int(ptr), bool(readonly)), "version": 2}


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
        if device == "cpu":
            self.device = None
        elif device == "cuda" or device.startswith("cuda:"):
            if self.tensors != "torch":
                raise ValueError(f"device = {device!r} needs tensors = 'torch'")
            self.device = device
        else:
            raise ValueError(f"device = {device!r}: expected 'cpu' or 'cuda'")
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
            ts = [_dtype_name(t) for t in per_op.get(op, ("float32",) if op in FLOAT32_OPS
                                                      else dtypes)]
            if op in FLOAT32_OPS and ts != ["float32"]:
                raise ValueError(f"op_dtypes[{op!r}] = {ts}: {op} takes float32 states only")
            if self.tensors == "numpy" and "bfloat16" in ts:
                raise ValueError("a NumPy kernel cannot take bfloat16 (NumPy has no such type); "
                                 "use tensors = 'torch'")
            op_dtypes[op] = ts
        def feature_bits(names, what):
            bits = 0
            for f in names or ():
                if f not in ATTENTION_FEATURES:
                    raise ValueError(f"{what} {f!r}: expected some of "
                                     f"{', '.join(ATTENTION_FEATURES)}")
                bits |= ATTENTION_FEATURES[f]
            return bits
        feats = feature_bits(getattr(k, "attention_features", ()), "attention feature")
        by_dtype = {}
        for t, names in (dict(getattr(k, "attention_features_by_dtype", {}) or {})).items():
            name_t = _dtype_name(t)
            by_dtype[name_t] = feature_bits(names, f"attention_features_by_dtype[{name_t!r}]")
        required = feature_bits(getattr(k, "attention_required", ()), "attention_required")
        only = 0
        for o in getattr(k, "attention_only", ()) or ():
            if o not in ATTENTION_ONLY:
                raise ValueError(f"attention_only {o!r}: expected some of "
                                 f"{', '.join(ATTENTION_ONLY)}")
            only |= ATTENTION_ONLY[o]
        multiple = int(getattr(k, "head_dim_multiple", 0) or 0)
        if multiple < 0:
            raise ValueError(f"head_dim_multiple = {multiple}: expected 0 or a positive integer")
        entropy_def = str(getattr(k, "adaptive_entropy", "shannon"))
        if entropy_def not in ENTROPY_DEFINITIONS:
            raise ValueError(f"adaptive_entropy = {entropy_def!r}: expected one of "
                             f"{', '.join(ENTROPY_DEFINITIONS)}")
        conv = getattr(k, "conventions", ()) or ()
        if isinstance(conv, str):
            conv = (conv,)
        flags = 0
        for c in conv:
            if c not in CONVENTIONS:
                raise ValueError(f"convention {c!r}: expected some of {', '.join(CONVENTIONS)}")
            flags |= CONVENTIONS[c]
        return {"name": name, "description": description, "origin": self._origin(),
                "convention_flags": flags,
                "adaptive_entropy": entropy_def, "device": "cuda" if self.device else "cpu",
                "op_dtypes": op_dtypes, "max_n": int(getattr(k, "max_n", 0) or 0),
                "attention_features": feats,
                "attention_features_by_dtype": by_dtype, "attention_required": required,
                "attention_constraints": only, "head_dim_multiple": multiple,
                "deterministic": bool(getattr(k, "deterministic", False))}

    # ---- buffers ----
    def _tensor(self, a):
        """A torch tensor over the gate's buffer (no copy): host or device memory."""
        if isinstance(a, DeviceArray):
            return self.torch.as_tensor(a, device=self.device)
        return self.torch.from_numpy(a)

    def _sync(self):
        """A CUDA kernel's work is finished before the gate copies its outputs back."""
        if self.device is not None:
            self.torch.cuda.synchronize()

    def _view(self, a, dt):
        if self.tensors == "numpy":
            return a
        if dt == "bfloat16":  # the bits arrive as uint16, which torch.from_numpy refuses
            bits = a if isinstance(a, DeviceArray) else a.view("int16")
            return self._tensor(bits).view(self.torch.bfloat16)
        return self._tensor(a)

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
        if res.device != o.device:
            raise ValueError(f"{what} returned a tensor on {res.device}, expected {o.device}")
        o.copy_(res)

    def _store_floats(self, out, res, what):
        """Float outputs (lse, entropy, beta, states, merges): any float type, stored as
        float32; the shape must be the expected one up to dimensions of size 1 (so an
        lse laid out [total_q, Hq] where [Hq, total_q] is expected is refused, not
        silently transposed)."""
        if self.tensors == "numpy":
            res = self.np.asarray(res)
            if res.dtype.kind != "f":
                raise TypeError(f"{what} returned {res.dtype}, expected a floating type")
        else:
            torch = self.torch
            if not isinstance(res, torch.Tensor) or not res.is_floating_point():
                raise TypeError(f"{what} returned {type(res).__name__} "
                                f"{getattr(res, 'dtype', '')}, expected a floating torch.Tensor")
        def squeezed(shape):
            return tuple(d for d in shape if d != 1)
        if squeezed(res.shape) != squeezed(out.shape):
            raise ValueError(f"{what} returned shape {tuple(res.shape)}, expected "
                             f"{tuple(out.shape)}")
        if self.tensors == "numpy":
            out[...] = res.reshape(out.shape)
        else:
            self._tensor(out).copy_(res.reshape(out.shape))

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

    def adaptive(self, dt, x, out, temperature, beta, entropy):
        res = self.fns["adaptive_softmax"](self._view(x, dt), temperature)
        got = (None, None)
        if isinstance(res, tuple):
            if len(res) != 3:
                raise TypeError(f"adaptive_softmax returned a tuple of {len(res)}, expected out "
                                "or (out, beta, entropy)")
            res, *got = res
        for want, have, what in ((beta, got[0], "beta"), (entropy, got[1], "entropy")):
            if want is None:
                continue
            if have is None:
                raise Unsupported(f"adaptive_softmax: {what} was asked for and the kernel "
                                  "returns only out")
            self._store_floats(want, have, "adaptive_softmax " + what)
        self._store(out, res, dt, "adaptive_softmax")

    def _floats_in(self, a):
        return self._tensor(a) if self.tensors == "torch" else a

    def merge_entropy(self, a, b, out):
        res = self.fns["merge_entropy_states"](self._floats_in(a), self._floats_in(b))
        self._store_floats(out, res, "merge_entropy_states")

    def merge_attention(self, outs, lses, out, out_lse):
        res = self.fns["merge_attention_states"]([self._floats_in(o) for o in outs],
                                                 [self._floats_in(x) for x in lses])
        if not isinstance(res, tuple) or len(res) != 2:
            raise TypeError(f"merge_attention_states returned {type(res).__name__}, "
                            "expected (out, lse)")
        self._store_floats(out, res[0], "merge_attention_states out")
        self._store_floats(out_lse, res[1], "merge_attention_states lse")

    def backward(self, op, dt, y, dy, dx, temperature):
        res = self.fns[op](self._view(y, dt), self._view(dy, dt), temperature)
        self._store(dx, res, dt, op)

    def _mask(self, mask):
        if mask is None:
            return None
        return (self._tensor(mask) != 0) if self.tensors == "torch" else mask != 0

    def _features(self, kw):
        """The feature keywords in use: heads-long arrays as the kernel's tensor type."""
        if self.tensors == "torch":
            arrays = ("alibi_slopes", "sinks", "cu_seqlens_q", "cu_seqlens_k", "seqused_k",
                      "block_table", "attn_bias")
            masks = ("attn_mask", "block_mask", "tree_mask")
            kw = {k: (self._tensor(v) != 0 if k in masks else
                      self._tensor(v) if k in arrays else v) for k, v in kw.items()}
        else:
            kw = {k: (v != 0 if k in ("attn_mask", "block_mask", "tree_mask") else v)
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
        lse_t = self._tensor(lse) if self.tensors == "torch" else lse
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


def _synced(slot):
    def call(self, *args):
        slot(self, *args)
        self._sync()
    call.__name__, call.__doc__ = slot.__name__, slot.__doc__
    return call


# Every slot ends with the kernel's device work finished (a no-op on the CPU).
for _slot in ("rows", "reduce", "adaptive", "merge_entropy", "merge_attention", "backward",
              "attention", "attention_backward"):
    setattr(Caller, _slot, _synced(getattr(Caller, _slot)))
