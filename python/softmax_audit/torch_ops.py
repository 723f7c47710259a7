"""PyTorch's own CPU operators as a kernel: the peer checked in CI (README, "From Python").

    softmax_audit.check("softmax_audit.torch_ops:kernel")

softmax, log_softmax and logsumexp are torch.softmax, torch.log_softmax and
torch.logsumexp over the last dimension, called in the input's type. The
backward ops are torch's autograd of those. attention is built from PyTorch
operators (matmul, masked_fill, softmax, matmul, in float32 for every input
type, cast back at the end), because PyTorch 1.13 has no
torch.nn.functional.scaled_dot_product_attention (it came in 2.0); where the
installed PyTorch has it, `sdpa_kernel` checks it too.

Temperature: PyTorch's operators take none; a call with theta != 1 is computed
on x.float() / theta (then cast back to the input's type), theta = 1 on x
itself, so every default case checks the operator in the input's own type.

Types: each (op, type) pair is declared only if PyTorch runs it on this CPU;
a pair it refuses (e.g. float16 softmax on the CPU in 1.13) is left out of the
declaration, and the gate reports it as not applicable, naming it; it is
listed in `refused`.
"""
import math

import torch

_TYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def _scaled(x, temperature):
    return x if temperature == 1 else x.float() / temperature


def _cast(y, like):
    return y if y.dtype == like.dtype else y.to(like.dtype)


def _probe(fn, dtype):
    try:
        fn(torch.zeros(2, 3, dtype=dtype))
        return None
    except RuntimeError as e:
        return str(e).splitlines()[0]


class TorchOps:
    """PyTorch CPU operators: torch.softmax, torch.log_softmax, torch.logsumexp, autograd, attention from torch ops"""

    tensors = "torch"
    attention_features = ("batched", "gqa", "strided", "causal", "key_padding", "lse",
                           "unequal_head_dims")
    deterministic = False

    def __init__(self):
        self.name = f"torch-{torch.__version__.split('+')[0]}-cpu"
        probes = {
            "softmax": lambda x: torch.softmax(x, -1),
            "log_softmax": lambda x: torch.log_softmax(x, -1),
            "logsumexp": lambda x: torch.logsumexp(x, -1),
            "softmax_backward": lambda x: torch._softmax_backward_data(x, x, -1, x.dtype),
            "log_softmax_backward":
                lambda x: torch._log_softmax_backward_data(x, x, -1, x.dtype),
            "attention": lambda x: torch.matmul(x, x.transpose(-1, -2)),
        }
        self.op_dtypes, self.refused = {}, {}
        for op, fn in probes.items():
            ok = []
            for name, t in _TYPES.items():
                why = _probe(fn, t)
                if why is None:
                    ok.append(name)
                else:
                    self.refused[(op, name)] = why
            self.op_dtypes[op] = ok
        self.dtypes = sorted({t for ts in self.op_dtypes.values() for t in ts})
        refused = "; ".join(f"{op}/{t}: {why}" for (op, t), why in self.refused.items())
        self.description = ("PyTorch " + torch.__version__ + " CPU operators" +
                            (f" (not run by PyTorch here: {refused})" if refused else ""))

    def softmax(self, x, temperature):
        return _cast(torch.softmax(_scaled(x, temperature), -1), x)

    def log_softmax(self, x, temperature):
        return _cast(torch.log_softmax(_scaled(x, temperature), -1), x)

    def logsumexp(self, x, temperature):
        return torch.logsumexp(_scaled(x, temperature), -1)

    def softmax_backward(self, y, dy, temperature):
        # d/dx softmax(x / theta) = (softmax's backward at y) / theta
        dx = torch._softmax_backward_data(dy, y, -1, y.dtype)
        return dx if temperature == 1 else _cast(dx.float() / temperature, y)

    def log_softmax_backward(self, y, dy, temperature):
        dx = torch._log_softmax_backward_data(dy, y, -1, y.dtype)
        return dx if temperature == 1 else _cast(dx.float() / temperature, y)

    def attention(self, q, k, v, *, scale, causal, alignment, key_padding_mask):
        hq, hk = q.shape[1], k.shape[1]
        qf, kf, vf = q.float(), k.float(), v.float()
        if hq != hk:  # GQA: query head h reads key/value head h // (hq // hk)
            kf = kf.repeat_interleave(hq // hk, dim=1)
            vf = vf.repeat_interleave(hq // hk, dim=1)
        s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
        sq, sk = s.shape[-2], s.shape[-1]
        if causal:
            off = sk - sq if alignment == "bottom_right" else 0
            i = torch.arange(sq).unsqueeze(1)
            j = torch.arange(sk).unsqueeze(0)
            s = s.masked_fill(j > i + off, -math.inf)
        if key_padding_mask is not None:
            s = s.masked_fill(~key_padding_mask[:, None, None, :], -math.inf)
        lse = torch.logsumexp(s, -1)
        # As attention is written with PyTorch's softmax: a query row with
        # every key masked gets NaN weights (PyTorch's documented softmax of an
        # all -inf row), where kernel.h says out 0; the gate names it.
        p = torch.softmax(s, -1)
        out = torch.matmul(p, vf)
        return out.to(q.dtype), lse


kernel = TorchOps()
