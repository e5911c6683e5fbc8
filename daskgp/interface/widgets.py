"""The dashboard's widgets that are more than a Panel widget with a default: inputs generated from the
methods' settings declarations (:mod:`daskgp.inference.settings`: the samplers', a sparse family's), and a
file upload the server caps.
"""

from __future__ import annotations

from ..inference.settings import setting_type, settings_fields
from ..mcmc.samplers import get_sampler, sampler_names

__all__ = ["capped_dropper", "setting_inputs"]


def setting_inputs(pn, method: str | None, methods=None) -> dict:
    """{method name: {setting name: input widget}} for the own settings of every method of ``methods`` (the
    registered samplers when None; else Method objects, e.g. a family's ``Registry.methods()``), each an
    IntInput or FloatInput at the setting's default with its help as the tooltip, labelled '<METHOD>
    <setting>'; those of ``method`` (the menu's choice) visible, the others hidden."""
    out = {}
    for m in (get_sampler(nm) for nm in sampler_names()) if methods is None else methods:
        inputs = {}
        for f in settings_fields(m.settings):
            kind = pn.widgets.IntInput if setting_type(f) is int else pn.widgets.FloatInput
            inputs[f.name] = kind(name=f"{m.name.upper()} {f.name.replace('_', ' ')}", value=f.default,
                                  description=f.metadata.get("help"), visible=m.name == method)
        out[m.name] = inputs
    return out


def capped_dropper(pn, max_bytes: int, rejected):
    """A chunked file upload (Panel's FileDropper: the browser refuses files over ``max_bytes`` and shows why)
    that the server also caps: a client that ignores the browser's check is cut off at ``max_bytes`` received,
    its chunks dropped, and ``rejected(message)`` called."""

    class CappedDropper(pn.widgets.FileDropper):
        def _process_event(self, event):
            data = event.data
            if event.event_name != "upload_event":
                return super()._process_event(event)
            name, last = data["name"], data["chunk"] == data["total_chunks"]
            refused = self.__dict__.setdefault("_refused", set())
            if data["chunk"] == 1:
                refused.discard(name)
            if name in refused:  # the rest of a refused file: dropped as it arrives
                if last:
                    refused.discard(name)
                return None
            got = sum(len(b) for b in self._file_buffer.get(name, [])) if data["chunk"] != 1 else 0
            if got + len(data["data"] or b"") > max_bytes:
                self._file_buffer.pop(name, None)
                if not last:
                    refused.add(name)
                rejected(f"the uploaded file is over the {max_bytes / 2**20:.3g} MB limit")
                return None
            return super()._process_event(event)

    return CappedDropper
