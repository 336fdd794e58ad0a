"""Sphinx configuration: numpydoc API reference, sphinx-gallery examples, built with -W."""

import os
import re
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import skgpu  # noqa: E402

project = "skgpu"
author = "the skgpu developers"
copyright = "2026, the skgpu developers"
release = version = skgpu.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]
autosummary_generate = True
templates_path = ["_templates"]
autodoc_default_options = {"members": True}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py.md5",
                    "auto_examples/*.zip"]
html_theme = "alabaster"
html_theme_options = {"description": "scikit-learn estimators on NVIDIA GPUs"}
html_static_path = []
nitpicky = False

# Estimators' HTML representations in the gallery link to their API pages in this build
# (skgpu/utils/_doc_link.py): relative to the gallery's pages, auto_examples/*.html.
os.environ["SKGPU_DOCUMENTATION_URL"] = ".."

sphinx_gallery_conf = {
    "examples_dirs": str(HERE.parent / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
    "show_memory": False,
}


# figures quoted in the pages (|fig-NAME|), computed from benchmarks/results/ (figures.py)
rst_prolog = __import__("figures").rst_prolog()


def _benchmark_tables(app):
    """docs/benchmark_results.rst and the user guide's generated tables, from the
    committed JSON under benchmarks/results/."""
    import benchmark_tables

    (HERE / "benchmark_results.rst").write_text(
        benchmark_tables.render(HERE.parent / "benchmarks" / "results"))
    (HERE / "sparse_gp_variance_table.inc").write_text(
        benchmark_tables.sparse_gp_variance_table(HERE.parent / "benchmarks" / "results"))
    (HERE / "sparse_gp_scale_table.inc").write_text(
        benchmark_tables.sparse_gp_scale_table(HERE.parent / "benchmarks" / "results"))


_SKLEARN_REF = re.compile(r":ref:`([^`<]*?)\s*(?:<([^>]*)>)?`")


def _plain_sklearn_refs(app, what, name, obj, options, lines):
    """Methods inherited from scikit-learn (``score``, ``get_feature_names_out``, ...)
    are listed on the API pages with scikit-learn's docstrings, whose ``:ref:`` roles
    point at labels of scikit-learn's own documentation: shown as plain text here."""
    if (getattr(obj, "__module__", None) or "").startswith("sklearn"):
        lines[:] = [_SKLEARN_REF.sub(lambda m: m.group(1).strip() or m.group(2), line)
                    for line in lines]


def setup(app):
    app.connect("builder-inited", _benchmark_tables)
    app.connect("autodoc-process-docstring", _plain_sklearn_refs)


os.environ.setdefault("MPLBACKEND", "Agg")
