"""The page's sparse-fit form: the family, its registered method and that method's own settings (generated
from the declarations, shown while it is the choice), the data set, m and the iterations — what becomes a
:class:`daskgp.interface.fitjob.FitJobSettings`, the family's own command run as a batch job."""

from __future__ import annotations

from .fitjob import FIT_DATASETS, FIT_LIMITS, FitJobSettings
from .fitkinds import fit_kind
from .widgets import setting_inputs

__all__ = ["FitForm"]


class FitForm:
    """The form's widgets (``shown``: visible at all — a page whose runs are read-only has no form) and the
    settings they hold; ``on_start(event)`` runs when its button is pressed."""

    def __init__(self, pn, shown: bool, on_start):
        self.shown = shown
        self.family = pn.widgets.Select(name="Sparse fit", options={"SGPR": "sgpr", "ADVGP": "advgp",
                                                                     "GPC": "gpc"}, visible=shown)
        # the family's method: every registered one (a third-party method too), shown for a family that
        # has a registry of them (GPC's classifier updates, ADVGP's server updates)
        self.method = pn.widgets.Select(name="Method", options=[], visible=False)
        # each such method's own settings, generated from its declaration, shown while it is the choice
        self.setting_inputs = {fam: setting_inputs(pn, None, reg.methods()) for fam in FIT_DATASETS
                               if (reg := fit_kind(fam).methods()) is not None}
        self.data = pn.widgets.Select(name="Fit dataset", options=list(FIT_DATASETS["sgpr"]), visible=shown)
        self.m = pn.widgets.IntInput(name="Inducing points m", value=FitJobSettings.n_inducing,
                                     start=FIT_LIMITS["n_inducing"][0], end=FIT_LIMITS["n_inducing"][1],
                                     visible=shown)
        self.iterations = pn.widgets.IntInput(name="Fit iterations", value=FitJobSettings.max_iter,
                                              start=FIT_LIMITS["max_iter"][0], end=FIT_LIMITS["max_iter"][1],
                                              visible=shown)
        self.start = pn.widgets.Button(name="Start fit", visible=shown, css_classes=["start-fit"])
        self.family.param.watch(self._on_family, "value")
        self.method.param.watch(self._show_settings, "value")
        self.start.on_click(on_start)

    def widgets(self) -> list:
        """In the page's order."""
        settings = [w for ms in self.setting_inputs.values() for ws in ms.values() for w in ws.values()]
        return [self.family, self.method, *settings, self.data, self.m, self.iterations, self.start]

    def _on_family(self, event) -> None:
        """The chosen family's datasets, and its methods' menu where it has a registry of them (its
        command's default chosen)."""
        self.data.options = list(FIT_DATASETS[event.new])
        kind = fit_kind(event.new)
        methods = kind.methods()
        names = [] if methods is None else list(methods.names())
        self.method.name, self.method.options = kind.method_label, names
        if names:
            self.method.value = kind.default_method or names[0]
        self.method.visible = bool(names) and self.shown
        self._show_settings()

    def _show_settings(self, event=None) -> None:
        """The chosen family's chosen method's own settings visible, every other method's hidden."""
        for fam, methods in self.setting_inputs.items():
            for nm, inputs in methods.items():
                for w in inputs.values():
                    w.visible = fam == self.family.value and nm == self.method.value and self.shown

    def options(self) -> tuple:
        """The chosen method's settings as the form holds them ((name, value) pairs; an empty one left out:
        the command's default)."""
        inputs = self.setting_inputs.get(self.family.value, {}).get(self.method.value, {})
        return tuple((k, w.value) for k, w in inputs.items() if w.value is not None)

    def settings(self, seed: int, scheduler, schedulers) -> FitJobSettings:
        """The job the form describes, checked (ValueError in one line naming the setting)."""
        chosen = bool(self.method.options)
        return FitJobSettings(family=self.family.value, dataset=self.data.value, n_inducing=int(self.m.value),
                              max_iter=int(self.iterations.value), seed=seed, scheduler=scheduler,
                              allowed_schedulers=schedulers, method=self.method.value if chosen else None,
                              options=self.options() if chosen else ()).validate()
