"""Render the committed benchmark JSON (benchmarks/results/*.json) as reStructuredText."""

import json
import re
from pathlib import Path

TITLE = "Benchmark results"


def _fmt_seconds(value):
    if value >= 1:
        return f"{value:.2f} s"
    return f"{value * 1e3:.1f} ms"


def _text(value):
    """Free text from a JSON file as reStructuredText: inline markup characters and a
    trailing underscore (``L_`` would be a link target) escaped."""
    text = re.sub(r"([*`|\\])", r"\\\1", str(value))
    return re.sub(r"(\w)_(?=\W|$)", r"\1\\_", text)


def _fmt_value(value):
    """A note's value: floats to four significant digits, the rest as text."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return _text(value)


def _table(rows, header=("measurement", "median (min–max)", "repeats"), widths="50 25 25"):
    """A list-table with a header row."""
    out = [".. list-table::", "   :header-rows: 1", f"   :widths: {widths}", ""]
    for row in [header] + rows:
        out.append(f"   * - {row[0]}")
        out += [f"     - {cell}" for cell in row[1:]]
    return out + [""]


def render(results_dir):
    lines = [TITLE, "=" * len(TITLE), "",
             "Generated from the JSON files under ``benchmarks/results/`` (one run of each "
             "script on the GPU host); ``benchmarks/README.md`` discusses them against the "
             "targets. Times are medians after a warm-up with the device synchronised.", ""]
    for path in sorted(Path(results_dir).glob("*.json")):
        doc = json.loads(path.read_text())
        title = path.stem.replace("_", " ")
        lines += [title, "-" * len(title), ""]
        machine = doc.get("machine", {})
        described = ", ".join(f"{k}: {v}" for k, v in machine.items()
                              if k in ("gpu", "cpu_count", "scikit-learn", "cupy",
                                       "nvmath-python"))
        lines += [f"Machine: {described}.", ""]
        if "rows" in doc:  # the suite (run_all.py): one row per measurement
            # every plot of the run: the speed-up first, then time against n per estimator
            plots = sorted(path.parent.glob(f"{path.stem}_*.png"),
                           key=lambda f: (not f.stem.endswith("_speedup"), f.name))
            for plot in plots:
                what = plot.stem[len(path.stem) + 1:].replace("_", " ")
                lines += [f".. image:: ../benchmarks/results/{plot.name}",
                          f"   :alt: {title}: {what}", ""]
            lines += _table(
                [(r["estimator"], r["operation"], f"{r['n']:,}", str(r["p"]), r["impl"],
                  r.get("error") or _fmt_seconds(r["median_s"]),
                  f"{r['rel_diff_vs_sklearn']:.1e}" if "rel_diff_vs_sklearn" in r else "")
                 for r in doc["rows"]],
                header=("estimator", "operation", "n", "p", "implementation", "median",
                        "agreement with scikit-learn"),
                widths="18 22 10 6 16 12 16")
        if "profiles" in doc:  # profile_rows.py: where each guard row's time goes
            lines += _table(
                [(_text(name), f"{p['wall_ms']:.2f} ms", f"{p['gpu_busy_ms']:.2f} ms",
                  f"{p['kernels']:,.0f}",
                  f"{sum(c['count'] for c in p['sync_calls'].values()):,.0f}",
                  "; ".join(f"{_text(k['name'][:40])} {k['ms']:.2f} ms"
                            for k in p["top_kernels"][:2]))
                 for name, p in doc["profiles"].items() if "error" not in p],
                header=("row", "wall (profiled)", "GPU busy", "kernels", "syncs",
                        "largest kernels"),
                widths="26 12 12 10 8 32")
        for result in doc.get("results", []):
            case = result.get("case", "?")
            if case == "error":
                continue
            lines += [f"**{_text(case)}**", ""]
            rows, notes = [], []
            for key, value in result.items():
                if key == "case":
                    continue
                if isinstance(value, dict) and "median_s" in value:
                    rows.append((key.replace("_", " "),
                                 f"{_fmt_seconds(value['median_s'])} "
                                 f"({_fmt_seconds(value['min_s'])}–"
                                 f"{_fmt_seconds(value['max_s'])})",
                                 str(value["repeats"])))
                elif isinstance(value, float) and key.endswith("_s"):
                    rows.append((key[:-2].replace("_", " "), _fmt_seconds(value), "1"))
                elif isinstance(value, (int, float, bool, str)):
                    notes.append(f"{key.replace('_', ' ')}: {_fmt_value(value)}")
            if rows:
                lines += _table(rows)
            if notes:
                lines += ["; ".join(notes), ""]
    return "\n".join(lines) + "\n"


#: The sparse GP's variance benchmark: the files the user guide's table is made from.
VARIANCE_FILES = ("sparse_gp_variance_cpu_2core.json", "sparse_gp_variance_h200.json",
                  "sparse_gp_variance_h100.json")


def through(std):
    """Which factor the variance went through, where the likelihood's did not serve."""
    return ("; skgpu's supernodal factor" if std.get("variance_factor") == "SupernodalFactor"
            else "")


def sparse_gp_variance_table(results_dir):
    """The user guide's table of the sparse GP's fit, mean, std and cov against n, from
    the committed runs of ``benchmarks/bench_sparse_gp_variance.py``."""
    header = ("n, backend (factor)", "fit (optimizer=None)", "mean", "std: cold, warm",
              "std by full solves", "cov: first, warm", "public LML + gradient")
    rows = []
    for name in VARIANCE_FILES:
        path = Path(results_dir) / name
        if not path.exists():
            continue
        doc = json.loads(path.read_text())
        by_tag = {}
        for row in doc["results"]:
            if ("case" not in row or ", n = " not in row["case"]
                    or row["case"].startswith("log_marginal_likelihood with gradient, ARD")):
                continue  # (the ARD likelihood: a row of its own, quoted in the text)
            what, tag = row["case"].split(", n = ", 1)
            by_tag.setdefault(tag, {})[what.split(",")[0]] = (what, row)
        gpu = doc.get("machine", {}).get("gpu", "")
        machine = ("2 CPU cores" if "cpu_2core" in name
                   else "H100" if "H100" in gpu else "H200")
        for tag, rows_of in by_tag.items():
            def get(key, rows_of=rows_of):
                return rows_of.get(key, (None, {}))

            fit = get("fit(optimizer=None)")[1]
            mean_what, mean = get("predict mean")
            std_what, std = get("predict std")
            cov_what, cov = get("predict cov")
            lml = get("public log_marginal_likelihood(theta")[1]
            points = mean_what.split(", ")[1] if mean_what else ""
            cov_points = cov_what.split(", ")[1] if cov_what else ""
            rows.append((
                f"{tag} ({machine})",
                _fmt_seconds(fit["fit_s"]) if fit else "",
                f"{_fmt_seconds(mean['predict']['median_s'])} ({points})" if mean else "",
                (f"{_fmt_seconds(std['cold_s'])}, {_fmt_seconds(std['warm']['median_s'])}"
                 f" ({points}{through(std)})") if std else "",
                (f"{_fmt_seconds(std['reference_scaled_to_points_s'])} (scaled from "
                 f"{std['reference_points']:,})") if std else "",
                (f"{_fmt_seconds(cov['first_s'])}, {_fmt_seconds(cov['warm']['median_s'])}"
                 f" ({cov_points})") if cov else "",
                (f"first {_fmt_seconds(lml['first_s'])}, then "
                 f"{_fmt_seconds(lml['repeated']['median_s'])}") if lml else ""))
    lines = _table(rows, header=header, widths="22 12 12 14 14 14 12")
    files = ", ".join(f"``{f}``" for f in VARIANCE_FILES)
    return "\n".join(lines + [f"(From ``benchmarks/results/``: {files}.)", ""])


#: The sparse GP at its largest: the files the user guide's scale table is made from.
SCALE_FILES = ("sparse_gp_scale_h100.json",)


def sparse_gp_scale_table(results_dir):
    """The user guide's table of the sparse GP at its largest (the memory estimate, the
    fit and 100,000 variances through skgpu's supernodal factor), from the committed
    runs of ``benchmarks/bench_sparse_gp_scale.py``."""
    header = ("n (GPU)", "fit (optimizer=None)", "std, 100,000 points: cold, warm",
              "std against full solves", "peak GPU memory")
    rows, estimates = [], []
    for name in SCALE_FILES:
        path = Path(results_dir) / name
        if not path.exists():
            continue
        doc = json.loads(path.read_text())
        gpu = doc.get("machine", {}).get("gpu", "")
        machine = "H100" if "H100" in gpu else "H200"
        fits = {}
        for row in doc["results"]:
            case = row.get("case", "")
            if case.startswith("memory estimate") and row.get("largest_n_factor"):
                at = case.split("n = ")[1].rsplit(", ", 1)[0]
                estimates.append(
                    f"the estimate from the analysis of {at} points: about "
                    f"{row['largest_n_factor']:,} fit in the {machine}'s "
                    f"{row['free_bytes'] / 1e9:.1f} GB free "
                    f"({row['largest_n_with_selected_inverse']:,} with the selected "
                    "inverse beside the factor)")
            elif case.startswith("fit(optimizer=None)"):
                fits[case.split(", ")[1]] = row
            elif case.startswith("predict std"):
                n_tag = case.split(", ")[2]
                fit = fits.get(n_tag, {})
                peak = fit.get("nvidia_smi_peak_mib_of_run")
                warm = row.get("warm_s") or []
                check = row.get("std_max_rel_diff_vs_full_solves")
                rows.append((
                    f"{n_tag.removeprefix('n = ')} ({machine}"
                    + (", the process's first)" if fit.get("first_in_process") else ")"),
                    _fmt_seconds(fit["fit_s"]) if fit else "",
                    f"{_fmt_seconds(row['cold_s'])}, "
                    + (_fmt_seconds(sorted(warm)[len(warm) // 2]) if warm else ""),
                    (f"{check:.1e} ({row['reference_points']} points)"
                     if check is not None else ""),
                    f"{peak * 2**20 / 1e9:.1f} GB (nvidia-smi)" if peak else
                    f"{row['pool_bytes_after'] / 1e9:.1f} GB (memory pool after)"))
    lines = _table(rows, header=header, widths="16 18 26 22 18")
    files = ", ".join(f"``{f}``" for f in SCALE_FILES)
    notes = "; ".join(estimates)
    notes = notes[:1].upper() + notes[1:] + ". " if notes else ""
    return "\n".join(lines + [f"{notes}(From ``benchmarks/results/``: {files}.)", ""])
