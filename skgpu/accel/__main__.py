"""``python -m skgpu.accel script.py [args]`` or ``python -m skgpu.accel -m module [args]``:
run a script or module unchanged, with skgpu's estimators behind scikit-learn's names."""

from __future__ import annotations

import os
import runpy
import sys

from . import install

USAGE = ("usage: python -m skgpu.accel script.py [args ...]\n"
         "       python -m skgpu.accel -m module [args ...]")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    install()
    if argv[0] == "-m":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        sys.argv = argv[1:]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = argv
        # as ``python script.py``: the script's folder first on the path (here, the cwd)
        sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
        runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
