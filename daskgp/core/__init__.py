"""The bottom layer, shared by every model family: kernels, priors, data sets, random streams, inducing-point
helpers, input validation, plain-data serialisation and atomic files. Imports nothing else of daskgp."""
