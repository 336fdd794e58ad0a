"""Zero-code-change mode (skgpu.accel): scikit-learn's names resolve to skgpu's estimators
while installed, scripts and modules run unchanged under ``python -m skgpu.accel``, and
scikit-learn gets its own classes back."""

import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import sklearn.decomposition
import sklearn.gaussian_process
import sklearn.linear_model

import skgpu.accel
from skgpu import backends
from skgpu.decomposition import PCA, TruncatedSVD
from skgpu.gaussian_process import GaussianProcessRegressor
from skgpu.linear_model import Ridge, RidgeCV

OURS = {("sklearn.decomposition", "PCA"): PCA,
        ("sklearn.decomposition", "TruncatedSVD"): TruncatedSVD,
        ("sklearn.linear_model", "Ridge"): Ridge,
        ("sklearn.linear_model", "RidgeCV"): RidgeCV,
        ("sklearn.gaussian_process", "GaussianProcessRegressor"): GaussianProcessRegressor}


def _resolved():
    return {key: getattr(sys.modules[key[0]], key[1]) for key in OURS}


def test_install_and_uninstall():
    before = _resolved()
    assert all(before[key] is not ours for key, ours in OURS.items())
    with skgpu.accel.installed():
        assert skgpu.accel.is_installed()
        assert _resolved() == OURS
        from sklearn.decomposition import PCA as Imported  # noqa: N813

        est = Imported(2)
        assert type(est) is PCA and repr(est) == "PCA(n_components=2)"
        assert isinstance(est, sklearn.decomposition.PCA)
        skgpu.accel.install()  # idempotent
    assert not skgpu.accel.is_installed()
    assert _resolved() == before


def test_install_and_uninstall_from_many_threads():
    """Installs and uninstalls racing in threads (a tiny switch interval makes them
    interleave) never leave skgpu's classes behind scikit-learn's names afterwards."""
    import threading

    before = _resolved()
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(60):
            start = threading.Barrier(6)

            def churn(i, start=start):
                start.wait()
                for _ in range(3):
                    (skgpu.accel.install if i % 2 else skgpu.accel.uninstall)()

            threads = [threading.Thread(target=churn, args=(i,)) for i in range(6)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            skgpu.accel.uninstall()
            assert _resolved() == before
    finally:
        sys.setswitchinterval(interval)
        skgpu.accel.uninstall()


def test_load_ext_warns_about_names_bound_before():
    """``%load_ext skgpu.accel`` after ``from sklearn.decomposition import PCA`` in an
    earlier cell: that name keeps scikit-learn's class, and the extension says so."""
    import types
    import warnings

    shell = types.SimpleNamespace(user_ns={"PCA": sklearn.decomposition.PCA, "x": 1,
                                           "_": sklearn.linear_model.Ridge})
    try:
        with pytest.warns(UserWarning, match=r"PCA \(sklearn.decomposition.PCA\)"):
            skgpu.accel.load_ipython_extension(shell)
        skgpu.accel.unload_ipython_extension(shell)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            skgpu.accel.load_ipython_extension(types.SimpleNamespace(user_ns={"x": 1}))
    finally:
        skgpu.accel.uninstall()


def test_a_search_built_from_sklearn_names_runs_skgpu(rng):
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import Pipeline

    X = rng.standard_normal((200, 12))
    y = X[:, :3].sum(axis=1) + 0.1 * rng.standard_normal(200)

    def search():
        pipe = Pipeline([("pca", sklearn.decomposition.PCA()),
                         ("ridge", sklearn.linear_model.RidgeCV())])
        return GridSearchCV(pipe, {"pca__n_components": [2, 6, 12]}, cv=3).fit(X, y)

    plain = search()
    with skgpu.accel.installed():
        accelerated = search()
    assert type(accelerated.best_estimator_["pca"]) is PCA
    assert type(plain.best_estimator_["pca"]) is not PCA
    assert accelerated.best_params_ == plain.best_params_
    np.testing.assert_allclose(accelerated.cv_results_["mean_test_score"],
                               plain.cv_results_["mean_test_score"], rtol=1e-9)


def test_an_option_skgpu_hands_to_sklearn_still_works(rng):
    """Ridge(solver='sag') is scikit-learn's code inside skgpu's class: same answer."""
    X = rng.standard_normal((100, 5))
    y = X @ np.arange(1.0, 6.0)
    plain = sklearn.linear_model.Ridge(solver="sag", random_state=0, tol=1e-10).fit(X, y)
    with skgpu.accel.installed():
        ours = sklearn.linear_model.Ridge(solver="sag", random_state=0, tol=1e-10).fit(X, y)
    assert type(ours) is Ridge
    np.testing.assert_allclose(ours.coef_, plain.coef_, rtol=1e-12)


SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from sklearn.decomposition import PCA
    import sklearn.linear_model as lm

    X = np.random.default_rng(0).standard_normal((300, 8))
    pca = PCA(3).fit(X)
    print(type(pca).__module__, type(lm.RidgeCV()).__module__, sys.argv[1:])
    print(" ".join(f"{v:.10f}" for v in pca.explained_variance_ratio_))
""")


def _run(args, cwd, extra_path=None):
    env = {**os.environ}
    if extra_path:
        env["PYTHONPATH"] = os.pathsep.join([extra_path, env.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True,
                         env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.splitlines()


def test_python_m_skgpu_accel_runs_a_script_and_a_module_unchanged(tmp_path):
    (tmp_path / "user_script.py").write_text(SCRIPT)
    plain = _run(["user_script.py", "a", "--b"], tmp_path)
    accelerated = _run(["-m", "skgpu.accel", "user_script.py", "a", "--b"], tmp_path)
    assert plain[0].startswith("sklearn.decomposition.")
    assert accelerated[0].startswith("skgpu.decomposition._pca skgpu.linear_model._ridge")
    assert plain[0].endswith("['a', '--b']") and accelerated[0].endswith("['a', '--b']")
    # the same numbers as scikit-learn's, for NumPy in
    np.testing.assert_allclose(np.array(accelerated[1].split(), dtype=float),
                               np.array(plain[1].split(), dtype=float), rtol=1e-9)
    as_module = _run(["-m", "skgpu.accel", "-m", "user_script", "c"], tmp_path,
                     extra_path=str(tmp_path))
    assert as_module == [accelerated[0].replace("['a', '--b']", "['c']"), accelerated[1]]


def test_usage(capsys):
    from skgpu.accel.__main__ import main

    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "GaussianProcessRegressor" in out and "%load_ext skgpu.accel" in out
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--profile-nothing", "-vvv", "--version", "-x"])
def test_an_unknown_option_is_refused_with_the_usage(option, capsys):
    """Not taken for a script's name ("can't open file '--version'")."""
    from skgpu.accel.__main__ import main

    assert main([option, "script.py"]) == 2
    err = capsys.readouterr().err
    assert f"unknown option {option!r}" in err and "usage:" in err
    assert not skgpu.accel.is_installed()


def test_a_missing_script_or_module_is_a_clear_error(tmp_path, capsys):
    """Not runpy's traceback: one line naming what is missing, nothing installed."""
    from skgpu.accel.__main__ import main

    assert main([str(tmp_path / "nowhere.py")]) == 2
    assert "can't open file" in capsys.readouterr().err
    assert main(["-m", "no_such_module_skgpu_test"]) == 1
    assert "No module named 'no_such_module_skgpu_test'" in capsys.readouterr().err
    assert not skgpu.accel.is_installed()


SKLEARN_TEST_MODULES = [
    "sklearn.decomposition.tests.test_pca",
    "sklearn.decomposition.tests.test_truncated_svd",
    "sklearn.linear_model.tests.test_ridge",
    "sklearn.gaussian_process.tests.test_gpr",
]

_UNDER_ACCEL = textwrap.dedent("""
    import importlib, sys
    import pytest
    import skgpu.accel

    skgpu.accel.install()
    module = importlib.import_module(sys.argv[-1])
    names = [n for n in ("PCA", "TruncatedSVD", "Ridge", "RidgeCV", "GaussianProcessRegressor")
             if hasattr(module, n)]
    assert names and all(getattr(module, n).__module__.startswith("skgpu.") for n in names)
    sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "--pyargs", sys.argv[-1]]))
""")


@pytest.mark.parametrize("module", SKLEARN_TEST_MODULES)
def test_sklearns_own_tests_pass_under_the_accelerator(module, tmp_path):
    """scikit-learn's test file for the estimator, run with its names resolved to skgpu's
    (on this machine's backend): every test passes that passes without the accelerator
    (scikit-learn's own skips and xfails stay as they are)."""
    pytest.importorskip(module)  # scikit-learn's wheels ship their tests
    out = subprocess.run([sys.executable, "-c", _UNDER_ACCEL, module], cwd=tmp_path,
                         capture_output=True, text=True)
    summary = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else ""
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert re.search(r"\d+ passed", summary), summary
    assert not re.search(r"\d+ (failed|errors?)\b", summary), summary


_MAIN = textwrap.dedent("""
    import joblib
    import sklearn.decomposition
    from . import helper

    if __name__ == "__main__":
        kinds = joblib.Parallel(n_jobs=2, backend="loky")(
            joblib.delayed(helper.kind)() for _ in range(4))
        print(helper.kind(), sorted(set(kinds)))
""")


def test_loky_workers_of_an_accelerated_module_get_skgpu_classes(tmp_path):
    """A helper module imported in a joblib (loky) worker binds skgpu's PCA, as the main
    process does; a user's own sitecustomize still runs; a plain run is untouched."""
    pkg = tmp_path / "userpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "helper.py").write_text(
        "from sklearn.decomposition import PCA\n\n\ndef kind():\n"
        "    import sitecustomize_of_the_user as s\n"
        "    return PCA.__module__ + ('+user' if s.ran else '')\n")
    (pkg / "main.py").write_text(_MAIN)
    user_site = tmp_path / "user_site"
    user_site.mkdir()
    (user_site / "sitecustomize.py").write_text(
        "import sys, types\n"
        "sys.modules['sitecustomize_of_the_user'] = types.SimpleNamespace(ran=True)\n")
    path = os.pathsep.join([str(tmp_path), str(user_site)])
    accelerated = _run(["-m", "skgpu.accel", "-m", "userpkg.main"], tmp_path, extra_path=path)
    assert accelerated == ["skgpu.decomposition._pca+user ['skgpu.decomposition._pca+user']"]
    plain = _run(["-m", "userpkg.main"], tmp_path, extra_path=path)
    assert plain == ["sklearn.decomposition._pca+user ['sklearn.decomposition._pca+user']"]


_VERBOSE_SCRIPT = textwrap.dedent("""
    import numpy as np
    from sklearn.decomposition import PCA
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline

    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 6))
    y = X @ rng.standard_normal(6)
    make_pipeline(PCA(3), Ridge(solver="lsqr")).fit(X, y).predict(X)
    for _ in range(3):
        Ridge(solver="lsqr").fit(X, y)
""")


@pytest.mark.parametrize("flag", ["-v", "-vv", "env"])
def test_verbose_accelerator_reports_each_call_and_a_summary(tmp_path, flag):
    """Each accelerated call on stderr (where it ran; why, where not on the GPU; with -vv
    its time), nested calls once, and a summary table at exit; the environment variable
    does what -v does."""
    (tmp_path / "script.py").write_text(_VERBOSE_SCRIPT)
    env = {**os.environ, "SKGPU_ACCEL_VERBOSE": "1"} if flag == "env" else dict(os.environ)
    args = ["-m", "skgpu.accel"] + ([] if flag == "env" else [flag]) + ["script.py"]
    out = subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True,
                         text=True, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    lines = [line for line in out.stderr.splitlines() if line.startswith("[skgpu.accel]")]
    calls = [line.split("] ", 1)[1] for line in lines if ": " in line.split("] ", 1)[1]]
    where = "gpu" if backends.gpu_status()[0] else "cpu"
    assert [c.split(":")[0] for c in calls] == ["PCA.fit_transform", "Ridge.fit",
                                               "PCA.transform", "Ridge.predict",
                                               "Ridge.fit", "Ridge.fit", "Ridge.fit"]
    assert calls[0].startswith(f"PCA.fit_transform: {where}")
    # the option skgpu hands over, and why: in full once, then by its number
    assert calls[1].startswith("Ridge.fit: scikit-learn") and "lsqr" in calls[1]
    number = re.search(r"\(reason (\d+): ", calls[1]).group(1)
    assert all(c.endswith(f"(reason {number})") and "lsqr" not in c for c in calls[4:])
    assert all((" ms" in c) == (flag == "-vv") for c in calls)
    table = out.stderr[out.stderr.index("summary of the accelerated calls"):]
    assert re.search(rf"PCA\s+{where}\s+2\s", table)
    assert re.search(r"Ridge\s+scikit-learn\s+4\s", table)
    assert re.search(rf"\n  {number}  4 calls: .*lsqr", table), table


def test_verbose_install_reports_in_process_and_uninstall_restores_the_methods(rng):
    import logging

    from skgpu.accel import _report

    fit = PCA.__dict__["fit"]
    ridge_methods = dict(vars(Ridge))
    level = logging.getLogger("skgpu").level
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("skgpu.accel").addHandler(handler)
    _report.reset()
    try:
        skgpu.accel.install(verbose=1)
        sklearn.decomposition.PCA(2).fit(rng.standard_normal((50, 4)))
        assert [r.getMessage().split(":")[0] for r in records] == ["PCA.fit"]
        assert re.search(r"PCA\s+\S+\s+1\s", skgpu.accel.summary())
    finally:
        skgpu.accel.uninstall()
        logging.getLogger("skgpu.accel").removeHandler(handler)
    assert PCA.__dict__["fit"] is fit
    assert dict(vars(Ridge)) == ridge_methods  # inherited methods: the wrappers removed
    assert logging.getLogger("skgpu").level == level  # as it was
    PCA(2).fit(rng.standard_normal((50, 4)))
    assert len(records) == 1  # no longer reported


_PROFILED_SCRIPT = textwrap.dedent("""
    import numpy as np
    from sklearn.decomposition import PCA
    from sklearn.linear_model import Ridge, RidgeCV
    from sklearn.model_selection import GridSearchCV
    from sklearn.pipeline import make_pipeline

    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 6))
    y = X @ rng.standard_normal(6)
    for _ in range(3):
        PCA(3).fit(X)
    Ridge(solver="lsqr").fit(X, y)
    GridSearchCV(make_pipeline(PCA(), RidgeCV()), {"pca__n_components": [2, 4]}, cv=3,
                 n_jobs=2).fit(X, y)
""")


def _table_rows(text, header):
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 1:]:
        if not line or line[0] == " " or not re.match(r"\S+\s+\S", line):
            break
        rows.append(line.split())
    return rows


@pytest.mark.parametrize("line_profile", [False, True])
def test_profile_merges_the_workers_calls_and_counts_each_reason(tmp_path, line_profile):
    """--profile: one table per estimator, method and backend with the loky workers'
    calls merged in (and counted on their own), each reason once with its calls;
    --line-profile: the script's lines with their hits, and the accelerated calls' time
    on the line they were made from."""
    (tmp_path / "script.py").write_text(_PROFILED_SCRIPT)
    args = ["-m", "skgpu.accel", "--profile"] + (["--line-profile"] if line_profile
                                                 else []) + ["script.py"]
    out = subprocess.run([sys.executable, *args], cwd=tmp_path, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    err = out.stderr
    # (loky may hand every task to one of its two workers)
    assert re.search(r"skgpu\.accel profile \(1 main process, [12] worker process", err), err
    rows = {(r[0], r[1], r[2]): r[3:] for r in _table_rows(err, "estimator  method")}
    where = "gpu" if backends.gpu_status()[0] else "cpu"
    # three PCA fits here; the search's 2 candidates x 3 folds fit_transform in workers
    # and the refit's once here
    assert rows[("PCA", "fit", where)][0] == "3" and rows[("PCA", "fit", where)][2] == "0"
    assert rows[("PCA", "fit_transform", where)][:1] == ["7"]
    assert rows[("PCA", "fit_transform", where)][2] == "6"
    assert rows[("RidgeCV", "fit", where)][0] == "7"
    assert rows[("Ridge", "fit", "scikit-learn")][0] == "1"
    assert re.search(r"\n  1 call: Ridge\.fit: solver='lsqr'", err), err
    assert err.count("solver='lsqr'") == 1
    if not line_profile:
        assert "line profile" not in err
        return
    lines = {int(r[0]): r for r in _table_rows(err, "line  hits")}
    fit_line = _PROFILED_SCRIPT.splitlines().index("    PCA(3).fit(X)") + 1
    assert lines[fit_line][1] == "3", lines[fit_line]
    assert f"{where} " in " ".join(lines[fit_line][3:]), lines[fit_line]
    assert "scikit-learn" in " ".join(lines[fit_line + 1])


def test_line_profile_takes_a_script_only(capsys):
    from skgpu.accel.__main__ import main

    assert main(["--line-profile", "-m", "json.tool"]) == 2
    assert "--line-profile takes a script" in capsys.readouterr().err
    assert not skgpu.accel.is_installed()
