import torch, softmax_audit  # a PyTorch softmax with kernel.h's special values, gated in 9 lines
class Softmax:
    dtypes = ("float32", "bfloat16")
    def softmax(self, x, temperature):  # masked rows give 0; +inf items share the weight
        z = x.float() / temperature; m = z.amax(-1, keepdim=True)
        e = torch.where(m.isposinf(), (z == m).float(), (z - m.nan_to_num(0.0, 0.0, 0.0)).exp())
        s = e.sum(-1, keepdim=True)
        return torch.where(s == 0, torch.zeros_like(e), e / s).to(x.dtype)
r = softmax_audit.check(Softmax(), cases=20, seed=7); print(r.summary()); assert r.ok
