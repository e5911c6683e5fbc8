"""Distributed sparse variational GP regression and the Bayesian GPLVM (Gal, van der Wilk & Rasmussen 2014):
the collapsed bound from per-chunk sums, row chunks on the workers (map-reduce), SGPR and the GPLVM.
Imports core and compute."""
