"""The figures the README and the user guide quote are the committed results' (one
source): ``docs/figures.py`` computes them; the README's must equal them, and every
``|fig-NAME|`` the pages use must be one it defines."""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _figures():
    spec = importlib.util.spec_from_file_location("figures", ROOT / "docs" / "figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("page", ["README.md", "benchmarks/README.md"])
def test_the_readmes_quote_the_results(page):
    figures = _figures()
    assert page in figures.PAGES
    text = (ROOT / page).read_text()
    assert "<!--fig:" in text
    assert figures.render_readme(text) == text, (
        f"{page} disagrees with benchmarks/results/: run python docs/figures.py")


def test_a_workload_both_readmes_quote_is_one_figure():
    """The same figure name where the two pages quote the same workload, never a value
    typed by hand from another run."""
    top = set(re.findall(r"<!--fig:([a-z0-9-]+)-->", (ROOT / "README.md").read_text()))
    bench = set(re.findall(r"<!--fig:([a-z0-9-]+)-->",
                           (ROOT / "benchmarks" / "README.md").read_text()))
    assert {"pca-gpu", "gp20k-gpu", "ridgecv-gpu", "sparse400k-gpu"} <= top & bench


def test_the_readme_check_sees_a_changed_figure():
    figures = _figures()
    text = (ROOT / "README.md").read_text()
    name, value = next(iter(figures.values().items()))
    changed = text.replace(f"<!--fig:{name}-->{value}<!--/fig-->",
                           f"<!--fig:{name}-->1 ms<!--/fig-->")
    assert changed != text and figures.render_readme(changed) == text


def test_every_figure_the_pages_use_is_defined():
    known = set(_figures().values())
    used = set()
    for page in (ROOT / "docs").glob("*.rst"):
        used |= set(re.findall(r"\|fig-([a-z0-9-]+)\|", page.read_text()))
    assert used and used <= known, used - known
