"""Figures quoted in the README and the user guide, computed from the committed results
(one source): each has a name, the results file and row it comes from, and its format.

- the user guide (and any page) writes ``|fig-NAME|``: ``conf.py`` defines each as an
  RST substitution (:func:`rst_prolog`);
- the README writes ``<!--fig:NAME-->VALUE<!--/fig-->``: ``python docs/figures.py``
  rewrites every VALUE from the results, and ``tests/test_docs_figures.py`` fails while
  the README disagrees with them.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"

#: The suite's rows (``results/suite_h200.json``): name -> (estimator, operation
#: prefix, n, implementation).
SUITE = {
    "pca-gpu": ("PCA", "fit", 1_000_000, "skgpu-gpu"),
    "pca-cpu": ("PCA", "fit", 1_000_000, "skgpu-cpu"),
    "pca-sklearn": ("PCA", "fit", 1_000_000, "sklearn-cpu"),
    "tsvd-gpu": ("TruncatedSVD", "fit", 500_000, "skgpu-gpu"),
    "tsvd-cpu": ("TruncatedSVD", "fit", 500_000, "skgpu-cpu"),
    "tsvd-sklearn": ("TruncatedSVD", "fit", 500_000, "sklearn-cpu"),
    "ridgecv-gpu": ("RidgeCV", "fit (LOO", 500_000, "skgpu-gpu"),
    "ridgecv-cpu": ("RidgeCV", "fit (LOO", 500_000, "skgpu-cpu"),
    "ridgecv-sklearn": ("RidgeCV", "fit (LOO", 500_000, "sklearn-cpu"),
    "gp3k-gpu": ("GaussianProcessRegressor", "LML + gradient", 3_000, "skgpu-gpu"),
    "gp3k-cpu": ("GaussianProcessRegressor", "LML + gradient", 3_000, "skgpu-cpu"),
    "gp3k-sklearn": ("GaussianProcessRegressor", "LML + gradient", 3_000, "sklearn-cpu"),
    "gp3k-gpytorch": ("GaussianProcessRegressor", "LML + gradient", 3_000,
                      "gpytorch-cholesky"),
    "gp20k-gpu": ("GaussianProcessRegressor", "LML + gradient", 20_000, "skgpu-gpu"),
    "gp20k-gpytorch": ("GaussianProcessRegressor", "LML + gradient", 20_000,
                       "gpytorch-cholesky"),
    "sparse400k-gpu": ("GaussianProcessRegressor (sparse)", "LML", 400_000, "skgpu-gpu"),
}
SUITE_FILE = "suite_h200.json"


def seconds(value):
    """A duration as the README and the guide print it (three significant digits)."""
    for scale, unit in ((1e-3, "µs"), (1.0, "ms"), (float("inf"), "s")):
        if value < scale:
            shown = value * 1e3 / scale if scale != float("inf") else value
            return f"{shown:#.3g}".rstrip(".") + f" {unit}"
    raise ValueError(value)


def values(results=RESULTS):
    """Every figure's text, by name."""
    rows = json.loads((Path(results) / SUITE_FILE).read_text())["rows"]
    out = {}
    for name, (estimator, operation, n, impl) in SUITE.items():
        found = [r for r in rows if r["estimator"] == estimator and r["n"] == n
                 and r["impl"] == impl and r["operation"].startswith(operation)]
        if len(found) != 1:
            raise LookupError(f"figure {name}: {len(found)} rows of {SUITE_FILE} match")
        out[name] = seconds(found[0]["median_s"])
    return out


def rst_prolog(results=RESULTS):
    """The RST substitutions ``|fig-NAME|`` for every figure."""
    return "\n".join(f".. |fig-{name}| replace:: {text}"
                     for name, text in values(results).items()) + "\n"


_README_FIGURE = re.compile(r"<!--fig:([a-z0-9-]+)-->(.*?)<!--/fig-->")


def render_readme(text, results=RESULTS):
    """``text`` with every README figure's value recomputed (an unknown name raises)."""
    known = values(results)

    def replace(match):
        name = match.group(1)
        if name not in known:
            raise KeyError(f"README names an unknown figure {name!r}")
        return f"<!--fig:{name}-->{known[name]}<!--/fig-->"

    return _README_FIGURE.sub(replace, text)


if __name__ == "__main__":
    readme = ROOT / "README.md"
    new = render_readme(readme.read_text())
    if new != readme.read_text():
        readme.write_text(new)
        print("README.md: figures rewritten from benchmarks/results/")
    else:
        print("README.md: figures agree with benchmarks/results/")
    sys.exit(0)
