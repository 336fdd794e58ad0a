"""The documentation link of an estimator's HTML representation (the "?" in a notebook).

scikit-learn's estimators link to their API page through ``_doc_link_module`` and
``_doc_link_template``, attributes it documents for other libraries' estimators. skgpu's
point at skgpu's own API pages (``generated/<module>.<Class>.html`` in the Sphinx build)
under the documentation URL the package's metadata names (``[project.urls]
Documentation`` in pyproject.toml), and carry no link while none is named: never one to
scikit-learn's pages, which describe a different class.
"""

from __future__ import annotations

import functools
from importlib import metadata


@functools.lru_cache(maxsize=None)
def documentation_url() -> str | None:
    """The ``Documentation`` project URL of the installed skgpu, or None."""
    try:
        urls = metadata.metadata("skgpu").get_all("Project-URL") or []
    except metadata.PackageNotFoundError:
        return None
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip().lower() == "documentation" and url.strip():
            return url.strip().rstrip("/")
    return None


class DocumentationLinkMixin:
    """Points scikit-learn's HTML repr link at skgpu's API page for the class."""

    _doc_link_module = "skgpu"

    @property
    def _doc_link_template(self) -> str:
        override = self.__dict__.get("_skgpu_doc_link_template")
        if override is not None:
            return override
        base = documentation_url()
        return "" if base is None else base + "/generated/{estimator_module}.{estimator_name}.html"

    @_doc_link_template.setter
    def _doc_link_template(self, value: str) -> None:
        self.__dict__["_skgpu_doc_link_template"] = value
