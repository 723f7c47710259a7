# A deliberately broken softmax: no max subtraction, so exp overflows for
# logits above 88.7 and the row turns to NaN. The gate fails it with a shrunk
# counterexample, printed as a ready-to-paste tensor (python/tests/test_examples.py).
import torch

import softmax_audit


class UnshiftedSoftmax:
    name = "unshifted-softmax"
    dtypes = ("float32",)

    def softmax(self, x, temperature):
        e = torch.exp(x / temperature)  # the bug: exp(x) without subtracting max(x)
        return e / e.sum(-1, keepdim=True)


if __name__ == "__main__":
    results = softmax_audit.check(UnshiftedSoftmax(), cases=30, seed=7)
    print(results.summary())
    raise SystemExit(results.exit_code)  # 1: a property failed
