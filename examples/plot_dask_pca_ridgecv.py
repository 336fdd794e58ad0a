"""
PCA and RidgeCV on a Dask array
===============================

A row-chunked ``dask.array`` goes straight into :class:`skgpu.decomposition.PCA` and
:class:`skgpu.linear_model.RidgeCV`: each chunk's Gram block, sums and R factor are computed
where the chunk lives (on a GPU for CuPy chunks), and combined on the client. The fitted
attributes equal an in-memory fit's. Here a ``dask.distributed`` LocalCluster of two CPU
workers (in threads) stands in for a cluster.
"""

import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from distributed import Client, LocalCluster

from skgpu.decomposition import PCA
from skgpu.linear_model import RidgeCV

n, p = 200_000, 30
mixing = np.eye(p) + 0.5 * np.random.default_rng(0).standard_normal((p, p))

with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                  dashboard_address=":0") as cluster, Client(cluster):
    # the data are drawn on the workers, 8 row chunks with all features in each (a NumPy
    # array wrapped by da.from_array would travel inside the task graph instead)
    draws = da.random.default_rng(0)
    Xd = draws.standard_normal((n, p), chunks=(25_000, -1)) @ mixing
    yd = Xd[:, :5].sum(axis=1) + draws.standard_normal(n, chunks=25_000)
    Xd, yd = Xd.persist(), yd.persist()
    pca = PCA(n_components=10).fit(Xd)
    ridge = RidgeCV(alphas=np.logspace(-2, 4, 13)).fit(Xd, yd)
    Z = pca.transform(Xd)  # lazy, chunked like Xd
    print(f"transform: {type(Z).__name__} with chunks {Z.chunks[0][:3]}...")
    X, y = Xd.compute(), yd.compute()  # the same data in memory, for the comparison

in_memory = PCA(n_components=10, svd_solver="covariance_eigh").fit(X)
print(f"PCA: largest difference from the in-memory fit "
      f"{np.max(np.abs(pca.explained_variance_ - in_memory.explained_variance_)):.1e}")
print(f"RidgeCV: alpha_ = {ridge.alpha_:g} "
      f"(in memory: {RidgeCV(alphas=np.logspace(-2, 4, 13)).fit(X, y).alpha_:g})")

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.bar(np.arange(1, 11) - 0.2, pca.explained_variance_ratio_, width=0.4, label="dask")
ax.bar(np.arange(1, 11) + 0.2, in_memory.explained_variance_ratio_, width=0.4,
       label="in memory")
ax.set_xlabel("component")
ax.set_ylabel("explained variance ratio")
ax.legend()
fig.tight_layout()
plt.show()
