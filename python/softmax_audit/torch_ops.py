"""PyTorch's own CPU operators as a kernel: the peer checked in CI (README, "From Python").

    softmax_audit.check("softmax_audit.torch_ops:kernel")

softmax, log_softmax and logsumexp are torch.softmax, torch.log_softmax and
torch.logsumexp over the last dimension, called in the input's type. The
backward ops are torch's autograd of those. attention is built from PyTorch
operators (matmul, tanh for the softcap, the ALiBi bias, masked_fill, a sink
column, softmax, matmul, in float32 for every input type, cast back at the
end), and attention_backward is torch.autograd of it, because PyTorch 1.13 has no
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
    attention_features = ("batched", "gqa", "strided", "causal", "window", "softcap", "alibi",
                          "sinks", "key_padding", "lse", "unequal_head_dims")
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
            "attention_backward": lambda x: torch.matmul(x, x.transpose(-1, -2)),
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

    @staticmethod
    def _attend(qf, kf, vf, *, scale, causal, alignment, key_padding_mask, window=None,
                softcap=0.0, alibi_slopes=None, sinks=None):
        """Attention in float32 from PyTorch operators, kernel.h's order of steps."""
        hq, hk = qf.shape[1], kf.shape[1]
        if hq != hk:  # GQA: query head h reads key/value head h // (hq // hk)
            kf = kf.repeat_interleave(hq // hk, dim=1)
            vf = vf.repeat_interleave(hq // hk, dim=1)
        s = torch.matmul(qf, kf.transpose(-1, -2)) * scale
        if softcap:
            s = softcap * torch.tanh(s / softcap)
        sq, sk = s.shape[-2], s.shape[-1]
        off = sk - sq if alignment == "bottom_right" else 0
        i = torch.arange(sq).unsqueeze(1)
        j = torch.arange(sk).unsqueeze(0)
        if alibi_slopes is not None:
            s = s - alibi_slopes.float()[None, :, None, None] * (i + off - j).abs().float()
        left, right = window if window is not None else (-1, -1)
        if causal:
            right = 0
        hidden = torch.zeros(sq, sk, dtype=torch.bool)
        if right >= 0:
            hidden |= j > i + off + right
        if left >= 0:
            hidden |= j < i + off - left
        s = s.masked_fill(hidden, -math.inf)
        if key_padding_mask is not None:
            s = s.masked_fill(~key_padding_mask[:, None, None, :], -math.inf)
        if sinks is not None:  # one more logit per head, with no value
            col = sinks.float()[None, :, None, None].expand(s.shape[0], s.shape[1], sq, 1)
            s = torch.cat([s, col], -1)
        lse = torch.logsumexp(s, -1)
        # As attention is written with PyTorch's softmax: a query row with
        # every key masked (and no sink) gets NaN weights (PyTorch's documented
        # softmax of an all -inf row), where kernel.h says out 0; the gate names it.
        p = torch.softmax(s, -1)
        if sinks is not None:
            p = p[..., :sk]
        return torch.matmul(p, vf), lse

    def attention(self, q, k, v, **kw):
        out, lse = self._attend(q.float(), k.float(), v.float(), **kw)
        return out.to(q.dtype), lse

    def attention_backward(self, q, k, v, out, dout, lse, *, sinks=None, **kw):
        # torch.autograd of the same float32 forward (the given out and lse
        # are not used: autograd recomputes them), gradients cast to the input
        # type; GQA's repeat_interleave sums dk, dv over a group's query heads.
        leaves = [x.float().requires_grad_() for x in (q, k, v)]
        if sinks is not None:
            leaves.append(sinks.float().clone().requires_grad_())
        with torch.enable_grad():
            o, _ = self._attend(*leaves[:3], sinks=leaves[3] if sinks is not None else None,
                                **kw)
            grads = torch.autograd.grad(o, leaves, grad_outputs=dout.float(), allow_unused=True)
        grads = [torch.zeros_like(x) if g is None else g for g, x in zip(grads, leaves)]
        res = tuple(g.to(q.dtype) for g in grads[:3])
        return res + (grads[3],) if sinks is not None else res


kernel = TorchOps()
