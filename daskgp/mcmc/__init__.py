"""Sampling the exact GP's hyperparameter posterior: samplers (SGLD, MH), chains on the cluster, the run
store on disk, ArviZ diagnostics, and the scikit-learn regressor over sampled hyperparameters. Imports core,
compute and exact."""
