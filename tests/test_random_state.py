"""``random_state`` as scikit-learn uses it: an int gives the same result on every call, a
caller's ``RandomState`` instance is drawn from and advanced by the draws scikit-learn's
estimator makes (code interleaving its own draws sees the same stream), ``None`` draws
from NumPy's global generator."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import sklearn.decomposition
import sklearn.gaussian_process
from conftest import DEVICES
from sklearn.gaussian_process.kernels import RBF, WhiteKernel
from sklearn.gaussian_process.kernels import ConstantKernel as C

import skgpu
import skgpu.decomposition
import skgpu.gaussian_process

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _same_state(a, b):
    sa, sb = a.get_state(), b.get_state()
    np.testing.assert_array_equal(sa[1], sb[1])
    assert sa[2:] == sb[2:]


DECOMPOSITIONS = {
    "pca-randomized": lambda m, rs: m.PCA(3, svd_solver="randomized", random_state=rs),
    "pca-arpack": lambda m, rs: m.PCA(3, svd_solver="arpack", random_state=rs),
    "truncated-svd": lambda m, rs: m.TruncatedSVD(3, random_state=rs),
    "truncated-svd-arpack": lambda m, rs: m.TruncatedSVD(3, algorithm="arpack",
                                                         random_state=rs),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", list(DECOMPOSITIONS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_decompositions_draw_from_the_callers_generator(seed, device, name, dtype):
    X = np.random.default_rng(seed).standard_normal((120, 25)).astype(dtype)
    make = DECOMPOSITIONS[name]
    theirs, ours = np.random.RandomState(seed), np.random.RandomState(seed)
    theirs.rand(3)  # the caller's own draws before and after, interleaved
    ours.rand(3)
    ref = make(sklearn.decomposition, theirs).fit(X)
    with skgpu.config_context(device=device):
        est = make(skgpu.decomposition, ours).fit(X)
    _same_state(ours, theirs)
    np.testing.assert_allclose(np.abs(est.components_), np.abs(ref.components_),
                               atol=1e-4 if dtype == np.float32 else 1e-8)
    # an int: the same result on every call
    with skgpu.config_context(device=device):
        first = make(skgpu.decomposition, seed).fit(X).components_
        again = make(skgpu.decomposition, seed).fit(X).components_
    np.testing.assert_array_equal(first, again)


@pytest.mark.parametrize("name", ["pca-randomized", "truncated-svd"])
def test_dask_fits_draw_from_the_callers_generator(client, seed, name):
    da = pytest.importorskip("dask.array")
    X = np.random.default_rng(seed).standard_normal((400, 25))
    make = DECOMPOSITIONS[name]
    theirs, ours = np.random.RandomState(seed), np.random.RandomState(seed)
    make(sklearn.decomposition, theirs).fit(X)
    make(skgpu.decomposition, ours).fit(da.from_array(X, chunks=(100, -1)))
    _same_state(ours, theirs)


def test_none_draws_from_the_global_generator():
    X = np.random.default_rng(0).standard_normal((120, 25))
    np.random.seed(11)
    sklearn.decomposition.PCA(3, svd_solver="randomized").fit(X)
    after_theirs = np.random.get_state()
    np.random.seed(11)
    skgpu.decomposition.PCA(3, svd_solver="randomized").fit(X)
    after_ours = np.random.get_state()
    np.testing.assert_array_equal(after_ours[1], after_theirs[1])
    assert after_ours[2:] == after_theirs[2:]


def _gp_data(seed):
    rng = np.random.default_rng(seed)
    X = rng.uniform(0, 3, (25, 2))
    return X, np.sin(2 * X[:, 0]) + X[:, 1] + 0.05 * rng.standard_normal(25)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("restarts", [0, 3])
def test_gp_restarts_and_samples_draw_from_the_callers_generator(seed, device, restarts):
    X, y = _gp_data(seed)
    kernel = C(1.0) * RBF([1.0, 1.0]) + WhiteKernel(0.1)
    states = []
    for module in (sklearn.gaussian_process, skgpu.gaussian_process):
        rs = np.random.RandomState(seed)
        with skgpu.config_context(device=device):
            gp = module.GaussianProcessRegressor(kernel, n_restarts_optimizer=restarts,
                                                 random_state=rs).fit(X, y)
            between = rs.randint(2**31)
            samples = gp.sample_y(X[:5], n_samples=2, random_state=rs)
        states.append((rs, between, samples, gp))
    (theirs, b_theirs, s_theirs, ref), (ours, b_ours, s_ours, gp) = states
    assert b_ours == b_theirs
    _same_state(ours, theirs)
    np.testing.assert_allclose(gp.kernel_.theta, ref.kernel_.theta, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(s_ours, s_theirs, rtol=1e-5, atol=1e-6)


def test_a_failed_gp_fit_advances_the_generator_as_scikit_learn_and_keeps_the_state():
    """A kernel matrix that is singular at every theta (duplicated points, no noise):
    scikit-learn draws every restart, then raises; so does skgpu, and its estimator keeps
    the previous fit."""
    X, y = _gp_data(0)
    Xd = np.vstack([X[:8], X[:8]])
    yd = np.r_[y[:8], y[:8] + 1.0]
    kernel = C(1.0) * RBF(1.0)
    theirs, ours = np.random.RandomState(5), np.random.RandomState(5)
    with pytest.raises(np.linalg.LinAlgError) as in_sklearn:
        sklearn.gaussian_process.GaussianProcessRegressor(
            kernel, alpha=0.0, n_restarts_optimizer=2, random_state=theirs).fit(Xd, yd)
    gp = skgpu.gaussian_process.GaussianProcessRegressor(
        kernel, alpha=0.0, n_restarts_optimizer=2, random_state=ours)
    gp.set_params(alpha=1e-2).fit(X, y)
    before = {k: v for k, v in vars(gp).items() if k.endswith("_")}
    gp.set_params(alpha=0.0)
    ours.set_state(np.random.RandomState(5).get_state())
    with pytest.raises(np.linalg.LinAlgError) as in_skgpu:
        gp.fit(Xd, yd)
    # scikit-learn's advice (the inner error's wording is the factorisation's own)
    assert in_skgpu.value.args[0] == in_sklearn.value.args[0]
    _same_state(ours, theirs)
    after = {k: v for k, v in vars(gp).items() if k.endswith("_")}
    assert after.keys() == before.keys()
    for key, value in before.items():
        assert after[key] is value, key


_OPTIMISATION_LOOP = textwrap.dedent("""
    import warnings
    import numpy as np
    from sklearn.exceptions import ConvergenceWarning
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, WhiteKernel
    from sklearn.gaussian_process.kernels import ConstantKernel as C

    warnings.simplefilter("ignore", ConvergenceWarning)
    rs = np.random.RandomState(0)      # one generator, shared by the model and the loop
    f = lambda x: np.sin(3 * x[:, 0]) * x[:, 1] + x[:, 1] ** 2
    X = rs.uniform(-1, 1, (6, 2))
    y = f(X)
    for _ in range(5):
        gp = GaussianProcessRegressor(C(1.0) * RBF([0.5, 0.5]) + WhiteKernel(1e-3),
                                      n_restarts_optimizer=2, random_state=rs).fit(X, y)
        candidates = rs.uniform(-1, 1, (300, 2))
        mean, std = gp.predict(candidates, return_std=True)
        best = candidates[np.argmax(mean + 2.0 * std)]
        print(type(gp).__module__, repr(best[0]), repr(best[1]))
        X, y = np.vstack([X, best]), np.r_[y, f(best[None, :])]
""")


def test_a_shared_generator_optimisation_loop_proposes_the_same_points_under_accel(
        tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(_OPTIMISATION_LOOP)

    def run(*args):
        out = subprocess.run([sys.executable, *args, str(script)], capture_output=True,
                             text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        assert out.returncode == 0, out.stderr[-2000:]
        return [line.split() for line in out.stdout.splitlines()]

    plain = run()
    accelerated = run("-m", "skgpu.accel")
    assert len(plain) == len(accelerated) == 5
    assert all(line[0].startswith("sklearn.") for line in plain)
    assert all(line[0].startswith("skgpu.") for line in accelerated)
    assert [line[1:] for line in accelerated] == [line[1:] for line in plain]



@pytest.mark.gpu
def test_a_device_drawn_test_matrix_takes_one_integer_from_the_generator():
    """The one deliberate difference: on the GPU a test matrix of 2²⁰ entries or more is
    drawn on the device, seeded by one integer from the caller's generator."""
    import scipy.sparse as sp

    from skgpu.backends.gpu import backend

    # tall (no transpose): the test matrix is n_features × (3 + 10); entries placed
    # directly (scipy's sparse.random draws positions out of all n × p)
    draw = np.random.default_rng(0)
    X = sp.csr_matrix((draw.standard_normal(200_000), (draw.integers(0, 100_000, 200_000),
                                                        draw.integers(0, 90_000, 200_000))),
                      shape=(100_000, 90_000))
    assert X.shape[1] * (3 + 10) >= backend.DEVICE_DRAW_MIN
    ours, expected = np.random.RandomState(4), np.random.RandomState(4)
    with skgpu.config_context(device="gpu"):
        skgpu.decomposition.TruncatedSVD(3, random_state=ours).fit(X)
    expected.randint(np.iinfo(np.int32).max)
    _same_state(ours, expected)
