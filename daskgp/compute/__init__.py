"""Computation on the cluster, independent of any model: the kernel operator (covariance matrix-vector
products that never store the n × n matrix), iterative solvers, tree reductions, and the Dask client helper.
Imports only :mod:`daskgp.core`."""
