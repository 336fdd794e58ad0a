"""Pieces shared by both backends."""

import numpy as np


def not_positive_definite(what, detail):
    return np.linalg.LinAlgError(
        f"The {what} is not positive definite ({detail}). Make it better conditioned, "
        "for example by adding a small positive value to its diagonal (for Gaussian "
        "processes: increase alpha or add a WhiteKernel)."
    )
