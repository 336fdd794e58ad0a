"""Sphinx configuration: numpydoc API reference, sphinx-gallery examples, built with -W."""

import os
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
autodoc_default_options = {"members": True, "inherited-members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py.md5",
                    "auto_examples/*.zip"]
html_theme = "alabaster"
html_theme_options = {"description": "scikit-learn estimators on NVIDIA GPUs"}
html_static_path = []
nitpicky = False

sphinx_gallery_conf = {
    "examples_dirs": str(HERE.parent / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "matplotlib_animations": False,
    "show_memory": False,
}


def _benchmark_tables(app):
    """docs/benchmark_results.rst from the committed JSON under benchmarks/results/."""
    import benchmark_tables

    (HERE / "benchmark_results.rst").write_text(
        benchmark_tables.render(HERE.parent / "benchmarks" / "results"))


def setup(app):
    app.connect("builder-inited", _benchmark_tables)


os.environ.setdefault("MPLBACKEND", "Agg")
