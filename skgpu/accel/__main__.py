"""``python -m skgpu.accel script.py [args]`` or ``python -m skgpu.accel -m module [args]``:
run a script or module unchanged, with skgpu's estimators behind scikit-learn's names."""

from __future__ import annotations

import importlib.util
import os
import runpy
import shutil
import sys
import tempfile

from . import install

USAGE = ("usage: python -m skgpu.accel [-v | -vv] [--profile] [--line-profile] "
         "script.py [args ...]\n"
         "       python -m skgpu.accel [-v | -vv] [--profile] -m module [args ...]")

HELP = USAGE + """

Run an unchanged scikit-learn script or module with skgpu's estimators behind
scikit-learn's names: sklearn.decomposition.PCA and TruncatedSVD,
sklearn.linear_model.Ridge and RidgeCV, sklearn.gaussian_process.GaussianProcessRegressor.
Everything after the script (or the module's name) is passed to it as its sys.argv.

-v reports each accelerated call on standard error: the estimator, the method, where it
ran (gpu, cpu, dask, or scikit-learn's own code) and, for work not on the GPU, why; at
exit, a summary table of the calls per estimator and backend. -vv adds each call's time.
SKGPU_ACCEL_VERBOSE=1 or 2 in the environment does the same (for notebooks, and for a
script's worker processes, which inherit it).

--profile prints, when the script ends, a table of the accelerated calls per estimator,
method and where they ran (calls, time), the worker processes' calls merged in (and
counted in a column of their own), and each reason for work not on the GPU once, with
its number of calls. --line-profile adds the time of each line of the script (from its
start to the next line's, the calls it makes included) and, per line, the time of the
accelerated calls made from it by where they ran; it traces the script's own frames,
which slows its Python code (not the libraries it calls) while it runs. Both print on
standard error.

Python processes started from the script (joblib's loky workers, multiprocessing,
subprocesses) run with the accelerator too: it sets SKGPU_ACCEL=1 and puts a start-up
hook first on PYTHONPATH, which they inherit.

Where each estimator ran, and why a case went to scikit-learn's implementation, is logged
at INFO on the "skgpu" logger; configure logging (logging.basicConfig(level="INFO")) to
see it. In a notebook: %load_ext skgpu.accel. From Python: skgpu.accel.install().
"""


#: The folder whose ``sitecustomize`` installs the accelerator in child processes.
SITE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_site")


def _reach_child_processes() -> None:
    """Python processes started from here (joblib's loky workers, multiprocessing,
    subprocesses) install the accelerator at their start (``_site/sitecustomize.py``):
    a helper module a worker imports gets skgpu's classes too."""
    os.environ["SKGPU_ACCEL"] = "1"
    path = os.environ.get("PYTHONPATH", "")
    if SITE_DIR not in path.split(os.pathsep):
        os.environ["PYTHONPATH"] = os.pathsep.join([SITE_DIR] + ([path] if path else []))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = None
    profile = line_profile = False
    while argv and argv[0] in ("-v", "-vv", "--verbose", "--profile", "--line-profile"):
        option = argv.pop(0)
        if option == "--profile":
            profile = True
        elif option == "--line-profile":
            line_profile = True
        else:
            verbose = (verbose or 0) + (2 if option == "-vv" else 1)
    if not argv or argv[0] in ("-h", "--help"):
        print(HELP if argv else USAGE, file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0].startswith("-") and argv[0] != "-m":
        print(f"python -m skgpu.accel: unknown option {argv[0]!r}\n{USAGE}",
              file=sys.stderr)
        return 2
    if argv[0] == "-m":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        if importlib.util.find_spec(argv[1].split(".")[0]) is None:
            print(f"python -m skgpu.accel: No module named {argv[1].split('.')[0]!r}",
                  file=sys.stderr)
            return 1
    elif not os.path.isfile(argv[0]):
        print(f"python -m skgpu.accel: can't open file {argv[0]!r}: no such file",
              file=sys.stderr)
        return 2
    if line_profile and argv[0] == "-m":
        print("python -m skgpu.accel: --line-profile takes a script, not -m module\n"
              + USAGE, file=sys.stderr)
        return 2
    if verbose is not None:
        os.environ["SKGPU_ACCEL_VERBOSE"] = str(verbose)
    folder = None
    if profile or line_profile:
        from . import _profile

        folder = tempfile.mkdtemp(prefix="skgpu-accel-profile-")
        os.environ[_profile.DIR_VARIABLE] = folder
        os.environ[_profile.PARENT_VARIABLE] = str(os.getpid())
        if line_profile:
            os.environ[_profile.LINE_VARIABLE] = os.path.abspath(argv[0])
    install()
    _reach_child_processes()
    try:
        if argv[0] == "-m":
            sys.argv = argv[1:]
            runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
        else:
            sys.argv = argv
            # as ``python script.py``: the script's folder first on the path (the cwd)
            sys.path[0] = os.path.dirname(os.path.abspath(argv[0]))
            runpy.run_path(os.path.abspath(argv[0]) if line_profile else argv[0],
                           run_name="__main__")
    finally:
        if folder is not None:
            _profile.stop_tracing()
            _profile.dump()
            print(_profile.report(folder), file=sys.stderr)
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
