"""Kernels for the Python package's tests: correct, broken, crashing, hanging, raising."""
import ctypes
import math
import os
import time

import torch

from softmax_audit.torch_ops import backward_by_sequence, forward_by_sequence


class Good:
    """float32/bfloat16 softmax and log_softmax computed in float32, kernel.h's special values"""
    name = "good"
    dtypes = ("float32", "bfloat16")

    @staticmethod
    def _exp(x, temperature):
        z = x.float() / temperature
        m = z.amax(-1, keepdim=True)
        e = torch.where(m.isposinf(), (z == m).float(), (z - m.nan_to_num(0.0, 0.0, 0.0)).exp())
        return z, m, e, e.sum(-1, keepdim=True)

    def softmax(self, x, temperature):
        z, m, e, s = self._exp(x, temperature)
        return torch.where(s == 0, torch.zeros_like(e), e / s).to(x.dtype)

    def log_softmax(self, x, temperature):
        z, m, e, s = self._exp(x, temperature)
        out = torch.where(m.isposinf(), (e / s).log(), z - m - s.log())
        return torch.where(s == 0, torch.full_like(e, -math.inf), out).to(x.dtype)


class Segfault(Good):
    name = "segfault"

    def softmax(self, x, temperature):
        ctypes.string_at(0)  # reads address 0: SIGSEGV


class Abort(Good):
    name = "abort"

    def softmax(self, x, temperature):
        os.abort()


class Hang(Good):
    name = "hang"

    def softmax(self, x, temperature):
        while True:
            time.sleep(0.05)


class Raises(Good):
    name = "raises"

    def softmax(self, x, temperature):
        raise RuntimeError("kernel bug: no softmax today")


class WritesInput(Good):
    """writes into its (read-only) input buffer: a stray write"""
    name = "writes-input"

    def softmax(self, x, temperature):
        x.add_(1)  # the gate's input buffer is mapped read-only
        return super().softmax(x, temperature)


class WrongType(Good):
    name = "wrong-type"

    def softmax(self, x, temperature):
        return torch.softmax(x.float() / temperature, -1)  # float32 for a bfloat16 input


good = Good()
segfault = Segfault()
hang = Hang()


class Attention:
    """Attention forward and backward from torch operators in float32 with kernel.h's
    semantics (FlashAttention's backward formulation from out and lse): fully masked
    rows give out 0, lse -inf and no gradient; keys no query sees are never read."""
    name = "torch-attention"
    dtypes = ("float32", "bfloat16")
    attention_features = ("batched", "gqa", "varlen", "strided", "causal", "window", "softcap",
                          "alibi", "sinks", "key_padding", "lse", "unequal_head_dims")

    @staticmethod
    def _scores(q, k, *, scale, causal, alignment, key_padding_mask, window=None, softcap=0.0,
                alibi_slopes=None):
        """(raw score t before the softcap, score s with -inf where hidden, visible)."""
        t = torch.matmul(q, k.transpose(-1, -2)) * scale
        s = softcap * torch.tanh(t / softcap) if softcap else t
        sq, sk = s.shape[-2], s.shape[-1]
        off = sk - sq if alignment == "bottom_right" else 0
        i = torch.arange(sq).unsqueeze(1)
        j = torch.arange(sk).unsqueeze(0)
        if alibi_slopes is not None:
            s = s - alibi_slopes.float()[None, :, None, None] * (i + off - j).abs().float()
        left, right = window if window is not None else (-1, -1)
        if causal:
            right = 0
        vis = torch.ones(sq, sk, dtype=torch.bool)
        if right >= 0:
            vis &= j <= i + off + right
        if left >= 0:
            vis &= j >= i + off - left
        vis = vis[None, None].expand(s.shape[0], s.shape[1], sq, sk)
        if key_padding_mask is not None:
            vis = vis & key_padding_mask[:, None, None, :]
        return t, s.masked_fill(~vis, -math.inf), vis

    @staticmethod
    def _expand(k, hq):
        return k.repeat_interleave(hq // k.shape[1], dim=1) if k.shape[1] != hq else k

    @staticmethod
    def _seen(vis, k):
        """k with the rows no query sees zeroed (they are never read: kernel.h)."""
        b, hq, _, sk = vis.shape
        seen = vis.reshape(b, k.shape[1], hq // k.shape[1], -1, sk).any(2).any(2)
        return k.float().masked_fill(~seen[..., None], 0.0)

    def _forward(self, q, k, v, sinks=None, **kw):
        hq = q.shape[1]
        # Keys no query sees are never read: their scores are masked to -inf
        # whatever they hold, while a NaN in a key some query sees reaches
        # that query's outputs (kernel.h).
        _, s, vis = self._scores(q.float(), self._expand(k.float(), hq), **kw)
        m = s.amax(-1, keepdim=True)
        if sinks is not None:
            m = torch.maximum(m, sinks.float()[None, :, None, None])
        m0 = torch.where(m.isinf(), torch.zeros_like(m), m)
        e = (s - m0).exp()
        S = e.sum(-1, keepdim=True)
        if sinks is not None:
            S = S + (sinks.float()[None, :, None, None] - m0).exp()
        vv = self._expand(self._seen(vis, v), hq)
        lse = torch.where(S == 0, torch.full_like(S, -math.inf), m0 + S.log()).squeeze(-1)
        return self._pv(e, S, vv, q.dtype), lse

    @staticmethod
    def _pv(e, S, vv, dtype):
        """out = (e / S) V in float32 (0 where S == 0)."""
        return torch.matmul(torch.where(S == 0, torch.zeros_like(e), e / S), vv)

    def attention(self, q, k, v, *, sinks=None, **kw):
        if "cu_seqlens_q" in kw:
            return forward_by_sequence(self.attention, q, k, v, sinks=sinks, **kw)
        out, lse = self._forward(q, k, v, sinks=sinks, **kw)
        return out.to(q.dtype), lse

    def attention_backward(self, q, k, v, out, dout, lse, *, sinks=None, **kw):
        if "cu_seqlens_q" in kw:
            return backward_by_sequence(self.attention_backward, q, k, v, out, dout, lse,
                                        sinks=sinks, **kw)
        hq, hk = q.shape[1], k.shape[1]
        # Keys no query sees are never read: their scores are masked to -inf
        # whatever they hold, while a NaN in a key some query sees reaches
        # that query's outputs (kernel.h).
        _, s, vis = self._scores(q.float(), self._expand(k.float(), hq), **kw)
        t, _, _ = self._scores(q.float(), self._expand(self._seen(vis, k), hq), **kw)
        L = lse.float()[..., None]
        p = torch.where(vis & L.isfinite(), (s - torch.where(L.isfinite(), L, 0.0)).exp(),
                        torch.zeros_like(s))
        do = dout.float()
        D = (do * out.float()).sum(-1, keepdim=True)
        vv = self._expand(self._seen(vis, v), hq)
        dp = torch.matmul(do, vv.transpose(-1, -2))
        ds = p * (dp - D)
        softcap = kw.get("softcap") or 0.0
        if softcap:
            ds = ds * (1 - torch.tanh(t / softcap) ** 2)
        kk = self._expand(self._seen(vis, k), hq)
        dq = torch.matmul(ds, kk) * kw["scale"]
        dk = torch.matmul(ds.transpose(-1, -2), q.float()) * kw["scale"]
        dv = torch.matmul(p.transpose(-1, -2), do)
        b, _, sk, _ = dk.shape
        dk = dk.reshape(b, hk, hq // hk, sk, -1).sum(2)
        dv = dv.reshape(b, hk, hq // hk, sk, -1).sum(2)
        res = (dq.to(q.dtype), dk.to(q.dtype), dv.to(q.dtype))
        if sinks is None:
            return res
        ps = torch.where(L.isfinite(), (sinks.float()[None, :, None, None] -
                                         torch.where(L.isfinite(), L, 0.0)).exp(), 0.0)
        return res + (-(ps * D).sum((0, 2, 3)),)


class AttentionDkNotSummed(Attention):
    """GQA bug: dk and dv of a key/value head are those of its first query head only"""
    name = "attention-dk-not-summed"

    def attention_backward(self, q, k, v, out, dout, lse, **kw):
        hq, hk = q.shape[1], k.shape[1]
        dq, dk, dv, *rest = super().attention_backward(q, k, v, out, dout, lse, **kw)
        if hq != hk:
            dk = dk / (hq // hk)  # as if one query head's share
        return (dq, dk, dv, *rest)


class AttentionLowPrecisionP(Attention):
    """FlashAttention's P V: exp(s - m) rounded to the input type (bfloat16, float16)
    for the product, the row sum taken in float32 before that rounding, out = (P V) / S
    (the low_precision_p convention)"""
    name = "attention-low-precision-p"

    @staticmethod
    def _pv(e, S, vv, dtype):
        o = torch.matmul(e.to(dtype).float(), vv)
        return torch.where(S == 0, torch.zeros_like(o), o / torch.where(S == 0, 1.0, S))


class AttentionVarlenIgnoresOffsets(Attention):
    """Varlen bug: every sequence is taken to start at cu_seqlens_k[0] (keys of the
    first sequence used for all)"""
    name = "attention-varlen-ignores-offsets"

    def attention(self, q, k, v, *, sinks=None, **kw):
        if "cu_seqlens_k" in kw:
            ck = kw["cu_seqlens_k"]
            lens = ck[1:] - ck[:-1]
            # each sequence reads its own length of keys, from row 0
            k = torch.cat([k[:n] for n in lens.tolist()] or [k[:0]], 0)
            v = torch.cat([v[:n] for n in lens.tolist()] or [v[:0]], 0)
            mask = kw.get("key_padding_mask")
            if mask is not None:
                kw["key_padding_mask"] = torch.cat([mask[:n] for n in lens.tolist()] or
                                                   [mask[:0]], 0)
        return super().attention(q, k, v, sinks=sinks, **kw)


class AttentionNoKeysNotZero(Attention):
    """Varlen bug: a sequence with queries and no keys gets out 1 (kernel.h: 0)"""
    name = "attention-no-keys-not-zero"

    def attention(self, q, k, v, *, sinks=None, **kw):
        out, lse = super().attention(q, k, v, sinks=sinks, **kw)
        if "cu_seqlens_k" in kw:
            cq, ck = kw["cu_seqlens_q"].tolist(), kw["cu_seqlens_k"].tolist()
            for b in range(len(cq) - 1):
                if cq[b + 1] > cq[b] and ck[b + 1] == ck[b]:
                    out[cq[b]:cq[b + 1]] = 1.0
        return out, lse


def _beta(H):
    """docs/theory.md T5: 1 if H <= 0.5, else max(poly(H), 1) (float64)."""
    poly = (((-0.037 * H + 0.481) * H - 2.3) * H + 4.917) * H - 1.791
    return torch.where(H > 0.5, torch.clamp(poly, min=1.0), torch.ones_like(H))


class Adaptive(Good):
    """adaptive_softmax in float64 from torch operators (the paper's adaptive temperature,
    Shannon entropy), kernel.h's special values"""
    name = "adaptive"
    dtypes = ("float32", "bfloat16")

    @staticmethod
    def _softmax64(z):
        m = z.amax(-1, keepdim=True)
        e = torch.where(m.isposinf(), (z == m).double(),
                        (z - m.nan_to_num(0.0, 0.0, 0.0)).exp())
        s = e.sum(-1, keepdim=True)
        return torch.where(s == 0, torch.zeros_like(e), e / s)

    def adaptive_softmax(self, x, temperature):
        z = x.double() / temperature
        p = self._softmax64(z)
        H = -(p * torch.where(p > 0, p.log(), torch.zeros_like(p))).sum(-1)
        b = torch.where(H.isnan(), H, _beta(H))
        y = self._softmax64(self.apply_beta(z, b[:, None]))
        return y.to(x.dtype), b.float(), H.float()

    @staticmethod
    def apply_beta(z, b):
        return z * b


class AdaptiveDividesByBeta(Adaptive):
    """adaptive_softmax bug: the logits are divided by beta (the temperature raised
    where it should fall), so the correction flattens instead of sharpening"""
    name = "adaptive-divides-by-beta"

    @staticmethod
    def apply_beta(z, b):
        return z / b


class Merges:
    """merge_entropy_states and merge_attention_states in float64 from torch operators,
    kernel.h's special values (empty parts contribute nothing; +inf maxima; NaN spreads)"""
    name = "merges"

    @staticmethod
    def _weights(m, M, empty):
        """exp(m - M) for each part (1 where m == M, also at +inf), 0 for empty parts;
        and m - M (0 where m == M or the part is empty)."""
        shift = torch.where((m == M) | empty, torch.zeros_like(m), m - M)
        return torch.where(empty, torch.zeros_like(m), shift.exp()), shift

    def merge_entropy_states(self, a, b):
        a, b = a.double(), b.double()
        M = torch.maximum(a[:, 0], b[:, 0])
        S = torch.zeros_like(M)
        T = torch.zeros_like(M)
        for x in (a, b):
            # a state's T is relative to its own m: relative to M it is T + (m - M) S
            w, shift = self._weights(x[:, 0], M, x[:, 1] == 0)
            S = S + w * x[:, 1]
            T = T + torch.where(w == 0, torch.zeros_like(w), w * (x[:, 2] + shift * x[:, 1]))
        return torch.stack([M, S, T], 1).float()

    def merge_attention_states(self, outs, lses):
        L = torch.stack([x.double() for x in lses])  # [parts, rows]
        M = L.amax(0)
        w, _ = self._weights(L, M[None], L == -math.inf)
        S = w.sum(0)
        o = sum(wi[:, None] * oi.double() for wi, oi in zip(w, outs))
        out = torch.where(S[:, None] == 0, torch.zeros_like(o), o / S[:, None])
        lse = torch.where(S == 0, torch.full_like(S, -math.inf), M + S.log())
        return out.float(), lse.float()


class MergesIgnoreEmpty(Merges):
    """merge_attention_states bug: a part with lse -inf is weighted as if its lse were 0"""
    name = "merges-ignore-empty"

    def merge_attention_states(self, outs, lses):
        lses = [torch.where(x.isinf() & (x < 0), torch.zeros_like(x), x) for x in lses]
        return super().merge_attention_states(outs, lses)


attention = Attention()
attention_varlen_ignores_offsets = AttentionVarlenIgnoresOffsets()
attention_no_keys_not_zero = AttentionNoKeysNotZero()
adaptive = Adaptive()
adaptive_divides_by_beta = AdaptiveDividesByBeta()
merges = Merges()
merges_ignore_empty = MergesIgnoreEmpty()
attention_dk_not_summed = AttentionDkNotSummed()
attention_low_precision_p = AttentionLowPrecisionP()


class CudaSoftmax(Good):
    """Good's softmax on CUDA tensors (device = "cuda": the gate stages device memory)"""
    name = "cuda-softmax"
    device = "cuda"


cuda_softmax = CudaSoftmax()


class AttentionCausalOnlyD8(Attention):
    """The same attention declaring a real library's domain: causal-only, head dims
    multiples of 8, bottom-right alignment only, sinks in bfloat16 only."""
    name = "torch-attention-causal-d8"
    attention_features = tuple(f for f in Attention.attention_features if f != "sinks")
    attention_features_by_dtype = {"bfloat16": Attention.attention_features}
    attention_required = ("causal",)
    attention_only = ("bottom_right",)
    head_dim_multiple = 8

    def attention(self, q, k, v, **kw):
        if not kw.get("causal") or q.shape[-1] % 8 or v.shape[-1] % 8:
            raise NotImplementedError(f"causal only, head dims multiples of 8: causal={kw.get('causal')} q{tuple(q.shape)} v{tuple(v.shape)}")
        return super().attention(q, k, v, **kw)


attention_causal_only_d8 = AttentionCausalOnlyD8()


class RowBackward(Good):
    """float32 softmax_backward in float32: dx = y (dy - sum(y dy)) / theta"""
    name = "row-backward"
    dtypes = ("float32",)

    def softmax_backward(self, y, dy, temperature):
        yf, df = y.float(), dy.float()
        s = (yf * df).sum(-1, keepdim=True)
        return ((yf * (df - s)) / temperature).to(y.dtype)


class RowBackwardNoSum(RowBackward):
    """softmax_backward bug: dx = y dy / theta (forgets the - sum(y dy) term)"""
    name = "row-backward-no-sum"

    def softmax_backward(self, y, dy, temperature):
        return (y.float() * dy.float() / temperature).to(y.dtype)


row_backward = RowBackward()
row_backward_no_sum = RowBackwardNoSum()
