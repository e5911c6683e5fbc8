"""scikit-learn's parameter constraints for daskgp's estimators: :class:`ValidatedParams` (the estimators'
``_validate_params`` with one rule stricter than scikit-learn's) and the constraint entries the estimators
declare — :func:`at_least`, :func:`real_in` and :func:`one_of_registered` (a method's name among a
registry's, as it is when the fit validates)."""

from __future__ import annotations

import numpy as np

__all__ = ["ValidatedParams", "at_least", "real_in", "one_of_registered"]


class ValidatedParams:
    """scikit-learn's parameter validation for an estimator: ``_parameter_constraints`` maps every
    constructor parameter to its allowed values (``sklearn.utils._param_validation``: ``Interval``,
    ``StrOptions``, types, ``None``, ``"boolean"``, ``"random_state"``, ``"no_validation"``), checked by
    ``_validate_params()`` at the start of ``fit`` with scikit-learn's own messages ("The 'n_inducing'
    parameter of SparseGPRegressor must be an int in the range [1, inf). Got 2.7 instead.") and its
    ``InvalidParameterError`` (a ValueError). One rule is stricter than scikit-learn's: True and False are
    not numbers here (scikit-learn lets ``n_inducing=True`` through as 1)."""

    _parameter_constraints: dict = {}

    def _validate_params(self) -> None:
        from sklearn.utils._param_validation import Interval, InvalidParameterError

        super()._validate_params()
        for name, constraints in self._parameter_constraints.items():
            if constraints == "no_validation":
                continue
            value = getattr(self, name)
            numeric = [c for c in constraints if isinstance(c, Interval)]
            if isinstance(value, (bool, np.bool_)) and numeric and "boolean" not in constraints:
                allowed = " or ".join(str(c) for c in numeric)
                raise InvalidParameterError(f"The {name!r} parameter of {type(self).__name__} must be "
                                            f"{allowed}. Got {value!r} instead.")


def at_least(low: int = 1):
    """The ``_parameter_constraints`` entry of an integer parameter ≥ ``low``."""
    from numbers import Integral

    from sklearn.utils._param_validation import Interval

    return Interval(Integral, low, None, closed="left")


def real_in(low, high, closed: str = "neither"):
    """The ``_parameter_constraints`` entry of a real parameter in (low, high) (``closed``: 'left',
    'right', 'both' or 'neither'; None for an unbounded side)."""
    from numbers import Real

    from sklearn.utils._param_validation import Interval

    return Interval(Real, low, high, closed=closed)


def one_of_registered(names):
    """The ``_parameter_constraints`` entry of a method's name: one of ``names()`` (a registry's names) as
    they are when a fit validates its parameters, so that a method registered after the estimator's module
    was imported is valid."""
    from sklearn.utils._param_validation import StrOptions

    class _Registered(StrOptions):
        def __init__(self):
            super().__init__(set())

        @property
        def options(self) -> set:
            return set(names())

        @options.setter
        def options(self, value) -> None:  # StrOptions sets it once; the registry is the source
            pass

    return _Registered()
