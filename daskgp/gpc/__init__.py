"""Sparse GP classification (FITC-probit) by EP, stochastic EP and ADF on Dask (Hernández-Lobato et al.
2015)."""
