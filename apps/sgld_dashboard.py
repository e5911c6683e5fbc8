"""The SGLD dashboard as a Panel app: ``panel serve apps/sgld_dashboard.py --address 127.0.0.1``
(or ``daskgp dashboard``, which does the same)."""

from daskgp.interface.app import create_app

create_app().servable(title="daskgp — SGLD dashboard")
