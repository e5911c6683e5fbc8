"""The model vocabulary every family shares (issue 57, item 1): kernel objects (:mod:`.kernels`: stationary
kernels k = σ²·f(r²) with their profiles), likelihood objects (:mod:`.likelihoods`: ``Gaussian``, ``Probit``)
and the named parameter structure (:mod:`.params`: blocks, their unconstrained vector and bounds). A floor of
its own just above ``core/``: it imports nothing of daskgp but ``core``."""
