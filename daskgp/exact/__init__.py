"""The exact GP (Filippone & Engler 2015): the log marginal likelihood and its unbiased stochastic gradient,
the hyperparameter posterior, and the mixture predictive over posterior draws. Imports core and compute."""
