"""The vocabulary every sparse family shares (SGPR and the GPLVM, ADVGP, sparse GP classification): the global
parameters of an inducing-point model, K_mm and K_mn for any stationary kernel of :mod:`daskgp.model.kernels`
with their adjoints, and the per-chunk statistics of observed inputs. The families sit above this layer
and never import one another."""
