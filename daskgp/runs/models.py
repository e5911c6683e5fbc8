"""A fitted estimator in one file — netCDF (``.nc``) or zarr (``.zarr``) — and back, the same way for every
family (issue 57, item 4): :class:`SavedModel` gives an estimator ``save(path)`` and ``load(path)`` from
two methods of its own, ``_fitted_state()`` and ``_restore_fitted(state)``.

The file (format 1) holds plain data only — arrays and JSON text; opening it executes nothing:

* variables: the fitted arrays, each under its name with dimensions ``<name>.0``, ``<name>.1``, …; the
  labelled datasets an estimator keeps (a sampled regressor's run) as ``<group>.<variable>`` with their
  dimensions and coordinates prefixed the same way;
* attributes: :data:`~daskgp.core.files.MARK` and ``model`` (``daskgp.saved.<class name>``), ``model_format``,
  ``params`` (the constructor's parameters as JSON: a kernel object as its name, type and hyperparameters),
  ``state`` (the fitted values that are not arrays, as :mod:`daskgp.core.plaindata` JSON), ``groups`` (each
  labelled dataset's attributes and variable names, JSON), ``digests`` (BLAKE2b of every variable) and
  ``attrs_digest`` (of the attributes above): a copy with a lost chunk or an altered value is refused, naming
  what differs, instead of predicting from it.

Written atomically by the writer rule (:func:`daskgp.core.files.check_destination`): a finished file or
none, over an existing one only with ``overwrite`` and only one this module wrote for the same class.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field

import numpy as np
import xarray as xr

from ..core.files import MANIFEST, MARK, array_digest, check_destination, replaced_atomically
from ..core.plaindata import decode, encode

__all__ = ["FORMAT", "SavedModel", "Saved", "store_format", "write_model", "open_saved", "read_model",
           "model_kind", "plain", "plain_params", "params_from_plain"]

FORMAT = 1
_ATTRS = ("model", "model_format", "params", "state", "groups")  # what the attribute digest covers


@dataclass
class Saved:
    """What a saved model holds: the constructor's ``params`` (plain data), ``arrays`` (name → ndarray),
    ``values`` (name → plain data: numbers, text, lists, dicts) and ``groups`` (name → xr.Dataset)."""

    params: dict
    arrays: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    groups: dict = field(default_factory=dict)


def model_kind(cls) -> str:
    """The marker a saved model of ``cls`` carries: ``daskgp.saved.<class name>`` (not the command line's
    results files' ``daskgp.<class name>``: a saved model is no results file, and neither may replace the
    other)."""
    return f"daskgp.saved.{cls.__name__}"


def store_format(path: str) -> str:
    """'netcdf' or 'zarr', by the path's ending (a saved model's two formats); ValueError for another."""
    if path.endswith((".nc", ".nc4", ".netcdf")):
        return "netcdf"
    if path.rstrip("/").endswith(".zarr"):
        return "zarr"
    raise ValueError(f"a saved model is a netCDF file (.nc) or a zarr store (.zarr), got {path}")


def _attrs_digest(attrs) -> str:
    text = "\n".join(f"{k}={attrs.get(k)!s}" for k in _ATTRS)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _dataset(saved: Saved, kind: str) -> xr.Dataset:
    variables, coords, groups = {}, {}, {}
    for name, a in saved.arrays.items():
        a = np.asarray(a)
        variables[name] = ((tuple(f"{name}.{i}" for i in range(a.ndim))), a)
    for g, ds in saved.groups.items():
        groups[g] = {"attrs": encode(plain(dict(ds.attrs))), "variables": [str(v) for v in ds.data_vars],
                     "coords": [str(c) for c in ds.coords]}
        for v in ds.variables:
            target = coords if v in ds.coords else variables
            target[f"{g}.{v}"] = (tuple(f"{g}.{d}" for d in ds[v].dims), ds[v].values)
    ds = xr.Dataset(variables, coords=coords)
    ds.attrs.update(model=kind, model_format=FORMAT, params=json.dumps(encode(saved.params)),
                    state=json.dumps(encode(saved.values), allow_nan=False),
                    groups=json.dumps(groups, allow_nan=False))
    ds.attrs[MARK] = kind
    ds.attrs["digests"] = json.dumps({str(k): array_digest(v.values) for k, v in ds.variables.items()})
    ds.attrs["attrs_digest"] = _attrs_digest(ds.attrs)
    return ds


def plain(value):
    """Attributes (of a dataset, a run) as plain data: numpy scalars and arrays become numbers and lists,
    nested dicts, lists and tuples are converted throughout (keys become strings)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def write_model(path, saved: Saved, kind: str, overwrite: bool = False) -> None:
    """Write ``saved`` to ``path`` (``.nc`` or ``.zarr``) atomically as a model of ``kind``."""
    path = os.fspath(path)
    fmt = store_format(path)
    check_destination(path, kind, overwrite=overwrite, flag="path")
    ds = _dataset(saved, kind)
    if fmt == "zarr":  # the nodes it writes: an overwrite later replaces a store holding these only
        ds.attrs[MANIFEST] = sorted(str(k) for k in ds.variables)
    with replaced_atomically(path) as tmp:
        ds.to_netcdf(tmp) if fmt == "netcdf" else ds.to_zarr(tmp, mode="w", consolidated=False)


def open_saved(path, kind: str, consolidated: bool | None = False) -> xr.Dataset:
    """The dataset of the saved model of ``kind`` at ``path`` (``.nc`` or ``.zarr``), in memory, its
    attribute 'model' checked (not its digests: the format's reader checks them). FileNotFoundError, or
    ValueError naming the file: not a readable netCDF/zarr, or another model."""
    path = os.fspath(path)
    fmt = store_format(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"no saved model at {path}")
    try:
        ds = (xr.load_dataset(path) if fmt == "netcdf"
              else xr.open_zarr(path, consolidated=consolidated).load())
    except Exception as e:  # a truncated or foreign file: the readers raise many kinds
        raise ValueError(f"{path} is not a readable {fmt} file ({type(e).__name__}: {e})") from None
    found = ds.attrs.get("model")
    if found != kind:
        raise ValueError(f"{path} holds no {kind} (attribute 'model' is {found!r})")
    return ds


def read_model(path, kind: str) -> Saved:
    """The saved model of ``kind`` at ``path``. FileNotFoundError, or ValueError naming the file: not a
    readable netCDF/zarr, another model, a format this daskgp does not read, or damaged."""
    path = os.fspath(path)
    ds = open_saved(path, kind)
    if str(ds.attrs.get("model_format")) != str(FORMAT):
        raise ValueError(f"{path} has model format {ds.attrs.get('model_format')!r}; this daskgp reads "
                         f"format {FORMAT}")
    _check_digests(ds, path)
    try:
        params, values = decode(json.loads(ds.attrs["params"])), decode(json.loads(ds.attrs["state"]))
        layout = json.loads(ds.attrs["groups"])
        groups = {g: _group(ds, g, spec) for g, spec in layout.items()}
        prefixes = tuple(f"{g}." for g in layout)
        arrays = {str(k): ds[k].values for k in ds.data_vars if not str(k).startswith(prefixes)}
    except (KeyError, TypeError, ValueError) as e:
        raise ValueError(f"{path} is an incomplete daskgp model ({type(e).__name__}: {e})") from None
    return Saved(params, arrays, values, groups)


def _group(ds: xr.Dataset, g: str, spec: dict) -> xr.Dataset:
    def unprefixed(v):
        var = ds[f"{g}.{v}"]
        return ([d[len(g) + 1:] for d in var.dims], var.values)

    return xr.Dataset({v: unprefixed(v) for v in spec["variables"]},
                      coords={c: unprefixed(c) for c in spec["coords"]}, attrs=decode(spec["attrs"]))


def _check_digests(ds: xr.Dataset, path: str) -> None:
    try:
        digests = json.loads(ds.attrs["digests"])
    except (KeyError, TypeError, ValueError):
        digests = None
    if not isinstance(digests, dict):
        raise ValueError(f"{path} has no readable digests: it was altered or is not a daskgp model; save the "
                         "model again")
    bad = [k for k, h in digests.items() if k not in ds.variables or array_digest(ds[k].values) != h]
    bad += [str(k) for k in ds.variables if str(k) not in digests]
    if ds.attrs.get("attrs_digest") != _attrs_digest(ds.attrs):
        bad.append("the attributes")
    if bad:
        raise ValueError(f"{path} is damaged: {', '.join(bad)} differ from what was saved (a lost or altered "
                         "chunk or value); save the model again")


def plain_params(value):
    """Constructor parameters as plain data: a kernel object anywhere in them (``kernel=``, a nested
    estimator's parameters) becomes ``{"__kernel__": name, "variance", "lengthscale", "ard"}``."""
    from ..model.kernels import Kernel

    if isinstance(value, Kernel):
        return {"__kernel__": type(value).name, "variance": value.variance,
                "lengthscale": np.asarray(value.lengthscale).tolist(), "ard": bool(value.ard)}
    if isinstance(value, dict):
        return {k: plain_params(v) for k, v in value.items()}
    return value


def params_from_plain(value):
    """The inverse of :func:`plain_params`."""
    from ..model.kernels import make_kernel

    if isinstance(value, dict) and "__kernel__" in value:
        return make_kernel(value["__kernel__"], variance=value["variance"], lengthscale=value["lengthscale"],
                           ard=value["ard"])
    if isinstance(value, dict):
        return {k: params_from_plain(v) for k, v in value.items()}
    return value


class SavedModel:
    """``save(path)`` and ``load(path)`` for an estimator that names its fitted state: ``_fitted_state()``
    returns a :class:`Saved` without ``params`` (filled here from ``get_params``) and
    ``_restore_fitted(saved)`` sets the fitted attributes on a new estimator built from the saved
    parameters. What every estimator has is kept here: ``n_features_in_``, ``feature_names_in_`` and a
    classifier's ``classes_`` (set before ``_restore_fitted`` runs). ``_unsaved_params``: constructor
    parameters that belong to the machine, not the model (a scheduler's address), stored as their
    defaults."""

    _unsaved_params: tuple = ("scheduler",)

    def save(self, path, overwrite: bool = False) -> None:
        """Write the fitted model to ``path``: netCDF (``.nc``) or zarr (``.zarr``), atomically (a finished
        file or none); ``overwrite`` replaces only a model of this class that daskgp saved. :meth:`load`
        reads it back as a fitted estimator that predicts identically."""
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self)
        saved = self._fitted_state()
        saved.values["n_features_in"] = int(self.n_features_in_)
        if hasattr(self, "feature_names_in_"):  # fitted on a DataFrame: predict checks the names
            saved.values["feature_names_in"] = [str(c) for c in self.feature_names_in_]
        if hasattr(self, "classes_"):  # labels keep their type: numbers as an array, text as text
            if self.classes_.dtype.kind in "biuf":
                saved.arrays["classes"] = self.classes_
            else:
                saved.values["classes"] = [str(c) for c in self.classes_]
        saved.params = plain_params({k: v for k, v in self.get_params(deep=False).items()
                                     if k not in self._unsaved_params})
        write_model(path, saved, model_kind(type(self)), overwrite=overwrite)

    @classmethod
    def load(cls, path):
        """A fitted estimator from :meth:`save`. Raises FileNotFoundError, or ValueError naming the file for
        anything else (another model, a damaged copy)."""
        saved = read_model(path, model_kind(cls))
        try:
            est = cls(**params_from_plain(saved.params))
            est.n_features_in_ = int(saved.values["n_features_in"])
            if "feature_names_in" in saved.values:
                est.feature_names_in_ = np.asarray(saved.values["feature_names_in"], dtype=object)
            if "classes" in saved.arrays or "classes" in saved.values:
                est.classes_ = saved.arrays.get("classes", np.asarray(saved.values.get("classes")))
            est._restore_fitted(saved)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{os.fspath(path)} is an incomplete {model_kind(cls)} ({type(e).__name__}: "
                             f"{e})") from None
        return est

    def _fitted_state(self) -> Saved:  # pragma: no cover - every subclass defines it
        raise NotImplementedError

    def _restore_fitted(self, saved: Saved) -> None:  # pragma: no cover
        raise NotImplementedError
