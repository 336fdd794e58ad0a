"""numpydoc validation of skgpu's public estimators: the classes and every public method
skgpu defines on them (inherited scikit-learn methods are scikit-learn's to document).

Run:  python tools/check_docstrings.py     (exit status 1 and the errors when any)

The checks scikit-learn's own docstring test leaves out are left out here too: examples,
extended summaries and See Also on every method (the classes carry See Also), and the
summary's wording rules that do not fit a property or a short sentence.
"""

import inspect
import sys

from numpydoc.validate import validate

import skgpu.decomposition
import skgpu.gaussian_process
import skgpu.linear_model

IGNORED = {
    "GL01", "GL02",  # where the docstring's text starts and ends
    "SA01",  # See Also: on the classes, not on every method
    "EX01", "ES01",  # examples and extended summaries: the user guide has them
    "SS05",  # "Fit the model" and "Fits the model" are both fine
    "PR09", "RT02",  # punctuation of parameter descriptions, return names
    "GL08",  # no docstring: properties inherited from scikit-learn's classes
}
CLASSES = [skgpu.decomposition.PCA, skgpu.decomposition.TruncatedSVD,
           skgpu.linear_model.Ridge, skgpu.linear_model.RidgeCV,
           skgpu.gaussian_process.GaussianProcessRegressor]


def names():
    for cls in CLASSES:
        public = cls.__module__.rsplit(".", 1)[0]
        yield f"{public}.{cls.__name__}"
        for name, member in inspect.getmembers(cls):
            func = getattr(member, "__func__", member)
            if (not name.startswith("_") and callable(func)
                    and getattr(func, "__module__", "").startswith("skgpu")):
                yield f"{public}.{cls.__name__}.{name}"


def main():
    errors = []
    for name in names():
        for code, message in validate(name)["errors"]:
            if code not in IGNORED:
                errors.append(f"{name}: {code} {message}")
    print("\n".join(errors) or "numpydoc: no errors")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
