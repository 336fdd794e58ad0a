"""scikit-learn's own test files for the five estimators, run with and without the
accelerator, and the outcome of every test compared.

Each file runs in its own Python (the four at once): once as scikit-learn ships it, once
under ``skgpu.accel`` with skgpu's backend set by ``--device`` (``gpu`` forces the GPU
backend, as the peers' accelerator checks do). The JSON gives the counts per file and
run, and every test whose outcome differs between the two runs (a test that fails in
both is scikit-learn's own and not counted against the accelerator).

    python benchmarks/accel_sklearn_tests.py --device cpu --out results/accel_sklearn_tests_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor

MODULES = [
    "sklearn.decomposition.tests.test_pca",
    "sklearn.decomposition.tests.test_truncated_svd",
    "sklearn.linear_model.tests.test_ridge",
    "sklearn.gaussian_process.tests.test_gpr",
]

_RUNNER = """
import sys
import pytest
accel, device, module, junit = sys.argv[1:5]
if accel == "1":
    import skgpu
    import skgpu.accel
    skgpu.accel.install()
    skgpu.set_config(device=device)
sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                      "--junitxml", junit, "--pyargs", module]))
"""


def _outcomes(junit_path):
    """{test id: 'passed' | 'failed' | 'error' | 'skipped' | 'xfailed'} from a JUnit file."""
    out = {}
    for case in ET.parse(junit_path).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = [child.tag for child in case]
        if "failure" in kinds:
            out[name] = "failed"
        elif "error" in kinds:
            out[name] = "error"
        elif "skipped" in kinds:
            skipped = case.find("skipped")
            xfail = skipped is not None and skipped.get("type") == "pytest.xfail"
            out[name] = "xfailed" if xfail else "skipped"
        else:
            out[name] = "passed"
    return out


def _run(module, accel, device, tmp):
    junit = os.path.join(tmp, f"{module}-{accel}.xml")
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "4"))
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", _RUNNER, "1" if accel else "0", device,
                           module, junit], cwd=tmp, env=env, capture_output=True, text=True,
                          check=False)  # a failing test file still writes its report
    seconds = time.perf_counter() - start
    if not os.path.exists(junit):
        raise RuntimeError(f"{module} (accel={accel}) produced no report:\n"
                           + proc.stdout[-3000:] + proc.stderr[-3000:])
    return _outcomes(junit), seconds


def _counts(outcomes):
    counts = {}
    for v in outcomes.values():
        counts[v] = counts.get(v, 0) + 1
    return dict(sorted(counts.items()))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cpu", "gpu", "auto"), default="auto")
    parser.add_argument("--out", default=None, help="JSON file (default: print)")
    parser.add_argument("--modules", nargs="*", default=MODULES)
    args = parser.parse_args(argv)

    import sklearn

    import skgpu

    results = []
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2 * len(args.modules)) as ex:
        jobs = {(m, accel): ex.submit(_run, m, accel, args.device, tmp)
                for m in args.modules for accel in (False, True)}
        for module in args.modules:
            plain, t_plain = jobs[module, False].result()
            under, t_under = jobs[module, True].result()
            differ = {k: {"sklearn": plain.get(k), "accel": under.get(k)}
                      for k in sorted(set(plain) | set(under))
                      if plain.get(k) != under.get(k)}
            # a test that passes as scikit-learn ships it and does not under the
            # accelerator (failed, error, skipped or missing) counts against it
            worse = [k for k, v in differ.items()
                     if v["sklearn"] == "passed" and v["accel"] != "passed"]
            ran = sum(1 for k, v in plain.items() if v == "passed")
            results.append({
                "case": module, "module": module,
                "sklearn": _counts(plain), "accel": _counts(under),
                "seconds": {"sklearn": round(t_plain, 1), "accel": round(t_under, 1)},
                "passing_under_accel_of_passing_without": (
                    f"{ran - len(worse)} / {ran}"),
                "fraction": round((ran - len(worse)) / ran, 4) if ran else None,
                "differences": differ,
            })
    gpu = _backend_line()
    report = {"machine": {"gpu": gpu, "cpu_count": os.cpu_count(),
                          "scikit-learn": sklearn.__version__},
              "device": args.device, "sklearn": sklearn.__version__,
              "skgpu": skgpu.__version__, "gpu_status": gpu,
              "results": results}
    text = json.dumps(report, indent=1)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    for r in results:
        print(f"{r['module']:50s} sklearn {r['sklearn']}  accel {r['accel']}  "
              f"{r['passing_under_accel_of_passing_without']}  differ {len(r['differences'])}")
    return 0


def _backend_line():
    from skgpu.backends import gpu_status

    ok, reason = gpu_status()
    return "gpu" if ok else f"cpu ({reason})"


if __name__ == "__main__":
    sys.exit(main())
