"""The file :meth:`daskgp.sparse.sgpr.SparseGPRegressor.save` writes and ``load`` reads (also
``daskgp sgpr``'s results file): a labelled netCDF or zarr dataset whose every variable, coordinate and read
attribute carries a digest, so a damaged copy is refused, naming what differs. Formats: 3 (digests of every
variable, coordinate and attribute load reads), 2 (the noise as a variance, digests of the data variables),
1 (daskgp 0.3, the noise's precision, no digests; still read)."""

from __future__ import annotations

import json
import os

import numpy as np
import xarray as xr

from ..core.files import array_digest
from ..runs.models import open_saved

__all__ = ["MODEL_FORMAT", "LOAD_ATTRS", "attrs_digest", "check_digests", "read_saved"]

MODEL_FORMAT = 3


# what load() reads from a saved model's attributes: covered by its digest (format 3)
LOAD_ATTRS = ("model", "model_format", "bound", "n_train", "n_inducing", "variance_std", "noise_std",
              "y_mean", "y_scale", "params", "fit_info")


def attrs_digest(attrs) -> str:
    """A digest of the attributes :meth:`SparseGPRegressor.load` reads, as plain text (numbers by their
    ``repr``, so a value read back from netCDF or zarr as a numpy scalar gives the same text)."""
    import hashlib

    def plain(v):
        if isinstance(v, bool | np.bool_):
            return repr(bool(v))
        if isinstance(v, int | np.integer):
            return repr(int(v))
        if isinstance(v, float | np.floating):
            return repr(float(v))
        return repr(str(v))

    text = "\n".join(f"{k}={plain(attrs[k]) if k in attrs else '<absent>'}" for k in LOAD_ATTRS)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def check_digests(ds: xr.Dataset, path: str, fmt_no: int) -> None:
    """Refuse, naming what differs, a saved model whose arrays or attributes are not what was saved. The
    digests are mandatory from format 2 on (daskgp >= 0.6 wrote them always); format 3 also covers the
    coordinates (the feature names) and the attributes load reads (y's scale and mean, the noise, the
    parameters). Format 1 (daskgp 0.3) had none and is read as it is."""
    raw = ds.attrs.get("digests")
    if raw is None and fmt_no >= 2:
        raise ValueError(f"{path} has no digests (every model of format {fmt_no} was saved with them): it "
                         "was altered or is not a daskgp model; save the model again")
    try:
        digests = json.loads(raw) if raw is not None else {}
    except (TypeError, ValueError):
        digests = None
    bad = (["digests"] if not isinstance(digests, dict) else
           [k for k, h in digests.items() if k not in ds.variables or array_digest(ds[k].values) != h])
    if fmt_no >= 3:  # (variables a results file adds beside the model, such as its test predictions, are not
        # read by load and carry no digest)
        bad += [k for k in ("feature", "iteration") if isinstance(digests, dict) and k not in digests]
        if ds.attrs.get("attrs_digest") != attrs_digest(ds.attrs):
            bad.append("the attributes")
    if bad:
        raise ValueError(f"{path} is damaged: {', '.join(bad)} differ from what was saved (a lost or "
                         "altered chunk or value); save the model again")


def read_saved(path) -> tuple[xr.Dataset, int]:
    """(the saved dataset, its format number) at ``path``, its digests checked. FileNotFoundError, or
    ValueError naming the file for anything else."""
    path = os.fspath(path)
    # (SGPR's zarr stores are consolidated: daskgp <= 0.7 wrote them so)
    ds = open_saved(path, "daskgp.SparseGPRegressor", consolidated=None)
    try:
        fmt_no = int(ds.attrs.get("model_format", 0))
    except (TypeError, ValueError):
        fmt_no = 0
    if fmt_no not in (1, 2, MODEL_FORMAT):
        raise ValueError(f"{path} has model format {ds.attrs.get('model_format')}; this daskgp reads "
                         f"formats 1 to {MODEL_FORMAT}")
    check_digests(ds, path, fmt_no)
    return ds, fmt_no
