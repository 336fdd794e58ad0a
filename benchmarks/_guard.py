"""The benchmark guard behind ``python benchmarks/run_all.py --check``: rows timed as the
suite times them, compared with a committed baseline, failing on a slowdown beyond the
noise the run itself measures.

On a machine without a GPU (CI's, a laptop) the rows are the small calls on the CPU
backend (``bench_small_calls.py``'s: transform/predict of 1 and 100 rows), each skgpu's
time as a ratio to scikit-learn's, the two called in turns in one process so that both see
the same seconds. A ratio is what is compared (a machine's speed cancels in it). Its
noise is measured, not assumed: the ratio of medians is bootstrapped from the calls'
times (resampling both sides), and a row fails only where the whole 95 % interval lies
above the baseline's ratio times ``1 + TOLERANCE``. The baseline
(``results/guard_baseline_cpu.json``) is rewritten only on purpose (``--update-baseline``),
and compared only where the scikit-learn version is the baseline's.

The GPU host's hot-loop rows (issue 50: RidgeCV, PCA fit and transform, the grid search,
the dense GP's likelihood) are not in the guard yet: they need the H200 to define and
measure.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
CPU_BASELINE = RESULTS / "guard_baseline_cpu.json"
#: A slowdown the guard lets pass even when measured precisely (machines differ a little
#: in the overheads that make up a small call).
TOLERANCE = 0.03
#: Rows per case and call counts of the CPU check (a few seconds on two cores).
CPU_ROWS = (1, 100)
CPU_ROUNDS = 300


def bootstrap_ratio(ours, theirs, draws=2000, seed=0):
    """The ratio of the median of ``ours`` to that of ``theirs`` (per-call times) and its
    95 % bootstrap interval, both samples resampled."""
    rng = np.random.default_rng(seed)
    a, b = np.asarray(ours, dtype=float), np.asarray(theirs, dtype=float)
    ratio = float(np.median(a) / np.median(b))
    ia = rng.integers(0, a.size, (draws, a.size))
    ib = rng.integers(0, b.size, (draws, b.size))
    boot = np.median(a[ia], axis=1) / np.median(b[ib], axis=1)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    return ratio, float(lo), float(hi)


def verdict(ratio, lo, hi, baseline, tolerance=TOLERANCE):
    """"slower" where the interval lies wholly above the baseline (times 1 +
    ``tolerance``), "faster" where it lies wholly below it, else "same"."""
    if lo > baseline * (1.0 + tolerance):
        return "slower"
    if hi < baseline / (1.0 + tolerance):
        return "faster"
    return "same"


def cpu_rows(rounds=CPU_ROUNDS, sizes=CPU_ROWS):
    """Each small-call case's ratio to scikit-learn, its interval and medians."""
    import skgpu
    from _harness import interleaved
    from bench_small_calls import fitted_calls

    out = []
    with skgpu.config_context(device="cpu"):
        for case, _, ours, theirs in fitted_calls(sizes):
            times = interleaved({"ours": ours, "theirs": theirs}, rounds=rounds, calls=1,
                                raw=True)
            a, b = times["ours"], times["theirs"]
            ratio, lo, hi = bootstrap_ratio(a, b)
            out.append({"case": case, "ratio": ratio, "interval": [lo, hi],
                        "skgpu_median_s": statistics.median(a),
                        "sklearn_median_s": statistics.median(b), "calls": rounds})
    return out


def check_cpu(update_baseline=False, report_only=False, rounds=CPU_ROUNDS, out=None):
    """Run the CPU rows, compare with the baseline, print a table; the exit status:
    1 where a row is slower (0 with ``report_only`` or ``update_baseline``)."""
    from _harness import machine

    import sklearn

    rows = cpu_rows(rounds)
    baseline = {}
    if CPU_BASELINE.exists():
        committed = json.loads(CPU_BASELINE.read_text())
        # a ratio to scikit-learn's time holds for that scikit-learn only (1.8.0's small
        # calls are faster than 1.9.1's: the same skgpu measured 1.14-1.20 against it)
        same = committed["machine"].get("scikit-learn") == sklearn.__version__
        if same or update_baseline:
            baseline = {r["case"]: r["ratio"] for r in committed["results"]}
        else:
            print(f"the baseline was measured with scikit-learn "
                  f"{committed['machine'].get('scikit-learn')}, this is "
                  f"{sklearn.__version__}: no verdicts")
    failed = []
    print(f"{'case':42s} {'ratio':>6s} {'95% interval':>15s} {'baseline':>8s}  verdict")
    for row in rows:
        base = baseline.get(row["case"])
        row["baseline"] = base
        row["verdict"] = ("no baseline" if base is None
                          else verdict(row["ratio"], *row["interval"], base))
        if row["verdict"] == "slower":
            failed.append(row["case"])
        lo, hi = row["interval"]
        print(f"{row['case']:42s} {row['ratio']:6.3f} [{lo:6.3f}, {hi:6.3f}] "
              f"{'-' if base is None else format(base, '8.3f'):>8s}  {row['verdict']}")
    doc = {"machine": machine(), "guard": "cpu small calls", "tolerance": TOLERANCE,
           "results": rows}
    if out:
        Path(out).write_text(json.dumps(doc, indent=1))
    if update_baseline:
        CPU_BASELINE.write_text(json.dumps(doc, indent=1))
        print(f"baseline rewritten: {CPU_BASELINE}")
        return 0
    if failed:
        print(f"slower than the baseline beyond the measured noise: {', '.join(failed)}",
              file=sys.stderr)
        return 0 if report_only else 1
    print("no row slower than the baseline beyond the measured noise")
    return 0
