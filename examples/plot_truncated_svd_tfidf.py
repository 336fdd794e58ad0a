"""
TruncatedSVD on a sparse TF-IDF matrix
======================================

Latent semantic analysis without densifying: :class:`skgpu.decomposition.TruncatedSVD`
(randomized, power iterations on sparse products) on a TF-IDF matrix of synthetic
documents whose word frequencies follow Zipf's law, beside scikit-learn's.
"""

import matplotlib.pyplot as plt
import numpy as np
import scipy.sparse as sp
from sklearn import decomposition as skd
from sklearn.feature_extraction.text import TfidfTransformer

from skgpu.decomposition import TruncatedSVD

rng = np.random.default_rng(0)
n_docs, n_words, words_per_doc = 3000, 5000, 80
topics = rng.integers(0, 10, n_docs)
rows = np.repeat(np.arange(n_docs), words_per_doc)
zipf = rng.zipf(1.3, rows.size) % n_words
cols = (zipf + 37 * topics[rows]) % n_words  # each topic shifts the vocabulary
counts = sp.csr_matrix((np.ones(rows.size), (rows, cols)), shape=(n_docs, n_words))
X = TfidfTransformer().fit_transform(counts)
print(f"X: {X.shape[0]} x {X.shape[1]}, {X.nnz} nonzeros ({X.nnz / np.prod(X.shape):.2%})")

svd = TruncatedSVD(n_components=30, random_state=0).fit(X)
reference = skd.TruncatedSVD(n_components=30, random_state=0).fit(X)
print(f"fitted on: {svd.backend_}; largest relative difference of the singular values: "
      f"{np.max(np.abs(svd.singular_values_ / reference.singular_values_ - 1)):.1e}")

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.semilogy(svd.singular_values_, marker=".", label="skgpu")
ax.semilogy(reference.singular_values_, ls="none", marker="x", label="scikit-learn")
ax.set_xlabel("component")
ax.set_ylabel("singular value")
ax.legend()
fig.tight_layout()
plt.show()
