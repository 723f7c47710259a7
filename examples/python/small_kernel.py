# A small PyTorch softmax kernel gated by softmax-audit (run by python/tests/test_examples.py).
import torch, softmax_audit

class Softmax:
    dtypes = ("float32", "bfloat16")
    def softmax(self, x, temperature):  # the op, computed in float32, returned in x's type
        return torch.softmax(x.float() / temperature, -1).to(x.dtype)

results = softmax_audit.check(Softmax(), cases=20, seed=7)
print(results.summary()); assert results.ok
