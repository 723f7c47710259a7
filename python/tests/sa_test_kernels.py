"""Kernels for the Python package's tests: correct, broken, crashing, hanging, raising."""
import ctypes
import os
import time

import torch


class Good:
    """float32/bfloat16 softmax and log_softmax computed in float32"""
    name = "good"
    dtypes = ("float32", "bfloat16")

    def softmax(self, x, temperature):
        return torch.softmax(x.float() / temperature, -1).to(x.dtype)

    def log_softmax(self, x, temperature):
        return torch.log_softmax(x.float() / temperature, -1).to(x.dtype)


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
