"""python3 -m softmax_audit check --python package.module:object [check's options]

What `softmax-audit check --python` runs (cli/python_kernel.hpp): the CLI's own
`check` command, with the named kernel imported only in the gate's isolated
child processes. Exit codes are check's: 0 pass, 1 fail, 2 usage or load
error, 3 incomplete.
"""
import os
import sys


def main():
    try:
        from softmax_audit import _core
    except ImportError as e:
        print(f"softmax-audit: error: the package's compiled module cannot be loaded ({e}); "
              "nothing was checked", file=sys.stderr)
        return 2
    code, _ = _core.main(["softmax-audit"] + sys.argv[1:])
    return code


def run():
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # no interpreter teardown: nothing a kernel left behind can change the code


if __name__ == "__main__":
    run()
