"""PyTorch's own CPU operators as a kernel: the peer checked in CI (docs/python.md).

    softmax_audit.check("softmax_audit.torch_ops:kernel")

softmax, log_softmax and logsumexp are torch.softmax, torch.log_softmax and
torch.logsumexp over the last dimension, called in the input's type. The
backward ops are torch's autograd of those. attention is built from PyTorch
operators (matmul, tanh for the softcap, the ALiBi bias, masked_fill, a sink
column, softmax, matmul, in float32 for every input type, cast back at the
end), and attention_backward is torch.autograd of it, because PyTorch 1.13 has no
torch.nn.functional.scaled_dot_product_attention (it came in 2.0); where the
installed PyTorch has it, `sdpa_kernel` is that operator behind the same
interface (SdpaOps; None here otherwise):

    softmax_audit.check("softmax_audit.torch_ops:sdpa_kernel")

Varlen calls (packed
sequences, FlashAttention's layout) run that attention once per sequence
(forward_by_sequence, backward_by_sequence: usable by any kernel whose own code
is dense only).

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


def _dense(x, lo, hi):
    """Rows lo .. hi-1 of a packed [total, H, D] tensor as a [1, H, hi-lo, D] view."""
    return x[lo:hi].permute(1, 0, 2).unsqueeze(0)


def _keys(x, b, k0, n, block_table, page_size):
    """Sequence b's first n key (or value) rows as a [1, H, n, D] tensor: rows
    k0 .. k0+n-1 of a packed [total, H, D] tensor, or of sequence b of a
    [B, H, S, D] one (k0 = 0), or gathered from a page pool [num_pages,
    page_size, H, D] through block_table[b]."""
    if block_table is not None:
        pages = block_table[b, :(n + page_size - 1) // page_size].long()
        rows = x[pages].reshape(-1, x.shape[2], x.shape[3])[:n]
        return rows.permute(1, 0, 2).unsqueeze(0)
    if x.dim() == 3:
        return _dense(x, k0, k0 + n)
    return x[b:b + 1, :, :n]


def _sequence_masks(kw, b, lq, lk):
    """The mask keywords of sequence b (lq queries, lk keys): each mask's
    [1, Hq, .., ..] slice over the sequence's own positions."""
    out = dict(kw)
    for name in ("attn_mask", "attn_bias"):
        if kw.get(name) is not None:
            out[name] = kw[name][b:b + 1, :, :lq, :lk]
    if kw.get("tree_mask") is not None:
        out["tree_mask"] = kw["tree_mask"][b:b + 1, :, :lq, :lq]
    if kw.get("block_mask") is not None:
        bq, bk = kw["block_size"]
        out["block_mask"] = kw["block_mask"][b:b + 1, :, :-(-lq // bq), :-(-lk // bk)]
    return out


def forward_by_sequence(attend, q, k, v, *, cu_seqlens_q=None, cu_seqlens_k=None,
                        max_seqlen_q=None, max_seqlen_k=None, seqused_k=None, block_table=None,
                        page_size=None, key_padding_mask=None, sinks=None, **kw):
    """A varlen, cache-length (seqused_k) or paged attention call answered by
    dense ones, sequence by sequence.

    attend(q, k, v, key_padding_mask=..., sinks=..., **kw) takes [1, H, L, D]
    tensors and returns (out [1, Hq, Lq, Dv], lse [1, Hq, Lq]). The result has
    the call's layout: (out [total_q, Hq, Dv], lse [Hq, total_q]) with
    cu_seqlens, else (out [B, Hq, Sq, Dv], lse [B, Hq, Sq]). Sequence b's keys
    are the first seqused_k[b] of its buffer (all of them without it), read
    through block_table when given. A sequence with no keys gets out 0 and
    lse -inf (its sink's logit with sinks). Masks (attn_mask, attn_bias,
    block_mask, tree_mask) reach attend cut to the sequence's own positions.
    """
    varlen = cu_seqlens_q is not None
    hq, dv = q.shape[1], v.shape[-1]
    if varlen:
        cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    else:
        nb, sq = q.shape[0], q.shape[2]
        sk = max_seqlen_k if max_seqlen_k is not None else (
            k.shape[2] if block_table is None else None)
        cq = [b * sq for b in range(nb + 1)]
        ck = [b * sk for b in range(nb + 1)] if sk is not None else None
    used = seqused_k.tolist() if seqused_k is not None else None
    outs, lses = [], []
    for b in range(len(cq) - 1):
        lq = cq[b + 1] - cq[b]
        nk = ck[b + 1] - ck[b] if ck is not None else None
        lk = used[b] if used is not None else nk
        k0 = ck[b] if varlen else 0
        if lq == 0:
            continue
        if lk == 0:
            o = torch.zeros(lq, hq, dv, dtype=q.dtype, device=q.device)
            lse = (sinks.float()[:, None] if sinks is not None
                   else torch.full((hq, 1), -math.inf, device=q.device)).expand(hq, lq)
        else:
            if key_padding_mask is None:
                mask = None
            elif varlen:
                mask = key_padding_mask[k0:k0 + lk][None]
            else:
                mask = key_padding_mask[b:b + 1, :lk]
            qb = _dense(q, cq[b], cq[b + 1]) if varlen else q[b:b + 1]
            o, lse = attend(qb, _keys(k, b, k0, lk, block_table, page_size),
                            _keys(v, b, k0, lk, block_table, page_size), key_padding_mask=mask,
                            sinks=sinks, **_sequence_masks(kw, b, lq, lk))
            o, lse = o[0].permute(1, 0, 2), lse[0].float()
        outs.append(o)
        lses.append(lse)
    if varlen:
        if not outs:
            return (torch.zeros(0, hq, dv, dtype=q.dtype, device=q.device),
                    torch.zeros(hq, 0, device=q.device))
        return torch.cat(outs, 0), torch.cat(lses, 1)
    return (torch.stack([o.permute(1, 0, 2) for o in outs]),
            torch.stack(lses))


def backward_by_sequence(grad, q, k, v, out, dout, lse, *, cu_seqlens_q, cu_seqlens_k,
                         max_seqlen_q, max_seqlen_k, key_padding_mask=None, sinks=None, **kw):
    """A varlen attention backward answered by a dense one, sequence by sequence.

    grad(q, k, v, out, dout, lse, key_padding_mask=..., sinks=..., **kw) takes the
    [1, H, L, D] tensors (lse [1, Hq, Lq]) and returns (dq, dk, dv) or (dq, dk, dv,
    dsinks); the result is packed like q, k and v, dsinks summed over sequences.
    Sequences with no queries or no keys contribute nothing (kernel.h).
    """
    cq, ck = cu_seqlens_q.tolist(), cu_seqlens_k.tolist()
    dq, dk, dv = torch.zeros_like(q), torch.zeros_like(k), torch.zeros_like(v)
    dsinks = torch.zeros(q.shape[1], device=q.device) if sinks is not None else None
    for b in range(len(cq) - 1):
        (q0, q1), (k0, k1) = (cq[b], cq[b + 1]), (ck[b], ck[b + 1])
        if q1 == q0 or k1 == k0:
            continue
        mask = None if key_padding_mask is None else key_padding_mask[k0:k1][None]
        g = grad(_dense(q, q0, q1), _dense(k, k0, k1), _dense(v, k0, k1), _dense(out, q0, q1),
                 _dense(dout, q0, q1), lse[:, q0:q1][None], key_padding_mask=mask, sinks=sinks,
                 **kw)
        dq[q0:q1] = g[0][0].permute(1, 0, 2)
        dk[k0:k1] = g[1][0].permute(1, 0, 2)
        dv[k0:k1] = g[2][0].permute(1, 0, 2)
        if sinks is not None:
            dsinks += g[3].float()
    return (dq, dk, dv) if sinks is None else (dq, dk, dv, dsinks)


class TorchOps:
    """PyTorch CPU operators: torch.softmax, torch.log_softmax, torch.logsumexp, autograd, attention from torch ops"""

    tensors = "torch"
    attention_features = ("batched", "gqa", "varlen", "strided", "causal", "window", "softcap",
                          "alibi", "sinks", "key_padding", "lse", "unequal_head_dims", "paged_kv",
                          "seqused_k", "attn_mask", "attn_bias", "block_mask", "tree_mask")
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
                softcap=0.0, alibi_slopes=None, sinks=None, attn_mask=None, attn_bias=None,
                block_mask=None, block_size=None, tree_mask=None):
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
        if attn_bias is not None:  # kernel.h step 3b, after softcap and ALiBi
            s = s + attn_bias[..., :sq, :sk].float()
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
        if attn_mask is not None:
            s = s.masked_fill(~attn_mask[..., :sq, :sk], -math.inf)
        if block_mask is not None:  # each block's bit over its queries and keys
            bq, bk = block_size
            full = block_mask.repeat_interleave(bq, -2).repeat_interleave(bk, -1)
            s = s.masked_fill(~full[..., :sq, :sk], -math.inf)
        if tree_mask is not None:  # key j is draft token t = j - (sk - sq) when t >= 0
            t = torch.arange(sk) - (sk - sq)
            drafts = t >= 0
            hidden_t = torch.zeros(s.shape, dtype=torch.bool)
            hidden_t[..., drafts] = ~tree_mask[..., :sq, :sq].index_select(-1, t[drafts]).expand(
                s.shape[0], s.shape[1], sq, int(drafts.sum()))
            s = s.masked_fill(hidden_t, -math.inf)
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
        if any(x in kw for x in ("cu_seqlens_q", "seqused_k", "block_table")):
            return forward_by_sequence(self.attention, q, k, v, **kw)
        out, lse = self._attend(q.float(), k.float(), v.float(), **kw)
        return out.to(q.dtype), lse

    def attention_backward(self, q, k, v, out, dout, lse, *, sinks=None, **kw):
        if "cu_seqlens_q" in kw:
            return backward_by_sequence(self.attention_backward, q, k, v, out, dout, lse,
                                        sinks=sinks, **kw)
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


class SdpaOps:
    """torch.nn.functional.scaled_dot_product_attention (PyTorch >= 2.0) on the CPU, and its
    autograd"""

    tensors = "torch"
    # SDPA has no softcap, ALiBi, sinks or window and returns no lse. GQA: with
    # enable_gqa (PyTorch >= 2.5) SDPA takes the key/value heads itself; before,
    # they are repeated, and the backward's dk, dv come back per query head
    # already rounded to the input type, summed over the group after that: for
    # bfloat16/float16 more than attention_backward.rounding allows where the
    # group's contributions cancel (the gate reports it; a kernel that sums in
    # float32 before rounding, as FlashAttention does, passes).
    attention_features = ("batched", "gqa", "strided", "causal", "key_padding",
                          "unequal_head_dims")
    deterministic = False

    def __init__(self, sdpa):
        import inspect
        self.sdpa = sdpa
        try:
            params = inspect.signature(sdpa).parameters
        except (TypeError, ValueError):
            params = {}
        self.takes_scale = "scale" in params
        self.takes_gqa = "enable_gqa" in params
        self.name = f"torch-{torch.__version__.split('+')[0]}-sdpa-cpu"
        ok, self.refused = [], {}
        for name, t in _TYPES.items():
            x = torch.zeros(1, 1, 2, 4, dtype=t)
            why = _probe(lambda _: sdpa(x, x, x), t)
            if why is None:
                ok.append(name)
            else:
                self.refused[("attention", name)] = why
        self.dtypes = ok
        self.op_dtypes = {"attention": ok, "attention_backward": ok}
        self.description = ("PyTorch " + torch.__version__ +
                            " scaled_dot_product_attention on the CPU")

    def _call(self, q, k, v, *, scale, causal, alignment, key_padding_mask):
        """SDPA on q [B, Hq, Sq, D] and k, v [B, Hkv, Sk, D] (Hkv = Hq unless enable_gqa)."""
        sq, sk, d = q.shape[2], k.shape[2], q.shape[3]
        mask, is_causal = None, False
        if causal:
            if alignment == "top_left" and key_padding_mask is None:
                is_causal = True  # SDPA's is_causal is top-left aligned
            else:
                off = sk - sq if alignment == "bottom_right" else 0
                j, i = torch.arange(sk, device=q.device), torch.arange(sq, device=q.device)
                mask = (j[None, :] <= i[:, None] + off)[None, None]
        if key_padding_mask is not None:
            kp = key_padding_mask[:, None, None, :]
            mask = kp if mask is None else mask & kp
        kw = {"enable_gqa": True} if self.takes_gqa and q.shape[1] != k.shape[1] else {}
        if self.takes_scale:
            kw["scale"] = scale
        elif abs(scale * math.sqrt(d) - 1) > 1e-12:
            raise ValueError("this scaled_dot_product_attention takes no scale and the case's "
                             "scale is not 1/sqrt(d)")
        return self.sdpa(q, k, v, attn_mask=mask, is_causal=is_causal, **kw)

    def _repeat(self, x, hq):
        if self.takes_gqa or x.shape[1] == hq:
            return x
        return x.repeat_interleave(hq // x.shape[1], dim=1)

    def attention(self, q, k, v, **kw):
        hq = q.shape[1]
        return self._call(q, self._repeat(k, hq), self._repeat(v, hq), **kw)

    def attention_backward(self, q, k, v, out, dout, lse, **kw):
        # SDPA's own backward through autograd in the input type (out and lse
        # are recomputed). Repeated GQA heads: each query head's dk, dv (in the
        # input type) summed over the group in float32, then rounded.
        hq, hk = q.shape[1], k.shape[1]
        leaves = [x.detach().clone().requires_grad_()
                  for x in (q, self._repeat(k, hq), self._repeat(v, hq))]
        with torch.enable_grad():
            o = self._call(*leaves, **kw)
            grads = torch.autograd.grad(o, leaves, grad_outputs=dout, allow_unused=True)
        dq, dk, dv = (torch.zeros_like(x) if g is None else g for g, x in zip(grads, leaves))
        if dk.shape[1] != hk:
            b, _, sk, _ = dk.shape
            dk = dk.float().reshape(b, hk, hq // hk, sk, -1).sum(2).to(k.dtype)
            dv = dv.float().reshape(b, hk, hq // hk, sk, -1).sum(2).to(v.dtype)
        return dq, dk, dv


kernel = TorchOps()
_sdpa = getattr(torch.nn.functional, "scaled_dot_product_attention", None)
sdpa_kernel = SdpaOps(_sdpa) if _sdpa is not None else None
