"""The interface layer at the top: the ``daskgp`` command line and the Panel dashboard. Nothing imports it
but ``apps/`` and the console script."""
