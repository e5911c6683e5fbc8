"""``python -m daskgp`` is the ``daskgp`` command."""

import sys

from .interface.cli import main

# not in the worker processes a local cluster spawns: they import this module as __mp_main__
if __name__ == "__main__":
    sys.exit(main())
