"""ADVGP: asynchronous distributed variational GP regression (Peng, Zhe & Qi 2017)."""
