"""Kernels for the Python package's tests: correct, broken, crashing, hanging, raising."""
import ctypes
import math
import os
import time

import torch


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
