"""The bottom layer, shared by every model family: priors, random streams, data fingerprints, input
validation, optimisers, plain-data serialisation, atomic files and the fit progress event. Imports nothing
else of daskgp (the kernels, likelihoods and parameter structure are the floor above it, ``daskgp.model``).
"""
