"""The documentation link of an estimator's HTML representation (the "?" in a notebook).

scikit-learn's estimators link to their API page through ``_doc_link_module`` and
``_doc_link_template``, attributes it documents for other libraries' estimators. skgpu's
point at skgpu's own API pages (``generated/<module>.<Class>.html`` in the Sphinx build)
under a documentation URL: the ``SKGPU_DOCUMENTATION_URL`` environment variable (the
documentation build sets it, relative, for the gallery's pages), else the one the package's
metadata names (``[project.urls] Documentation`` in pyproject.toml). With neither they
carry no link: never one to scikit-learn's pages, which describe a different class.
"""

from __future__ import annotations

import functools
import os
from importlib import metadata

#: Environment variable naming the documentation's base URL (absolute, or relative to the
#: page the representation is shown on).
URL_VARIABLE = "SKGPU_DOCUMENTATION_URL"


def documentation_url() -> str | None:
    """The documentation's base URL: ``SKGPU_DOCUMENTATION_URL``, else the installed
    skgpu's ``Documentation`` project URL, else None."""
    url = os.environ.get(URL_VARIABLE, "").strip()
    return url.rstrip("/") if url else _metadata_url()


@functools.lru_cache(maxsize=None)
def _metadata_url() -> str | None:
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
