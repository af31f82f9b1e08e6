"""The roofline's inputs from what is known: the scenario's ``hardware:``/``model:`` and the server's metadata.

Why one place: ``profile`` and an ordinary run's analysis both need the same
ceilings and model size, from the same sources in the same order: what the
scenario says wins; what it leaves out is read from the server where it tells
(llama.cpp's ``/v1/models`` ``meta``: ``n_params`` and ``size`` in bytes, from
which bytes per weight follow). Pure over dicts.
"""

from __future__ import annotations

from typing import Any, Mapping

from loadtest.analysis.roofline import Ceilings, ModelSize, ceilings_of
from loadtest.facts import Hardware, ModelFacts


def model_meta(models_body: Any) -> dict[str, Any]:
    """llama.cpp-style ``meta`` of the first model in a ``/v1/models`` answer ({} when absent)."""
    try:
        meta = models_body["data"][0].get("meta") or {}
    except (KeyError, IndexError, TypeError, AttributeError):
        return {}
    return {k: meta[k] for k in ("n_params", "size", "n_ctx_train") if isinstance(meta.get(k), (int, float))}


def model_size(model: Any, meta: Mapping[str, Any]) -> ModelSize | None:
    """Parameters, bytes per weight and KV bytes per token; None when the parameter count is unknown."""
    params = model.params_b * 1e9 if model is not None and model.params_b else meta.get("n_params")
    if not params:
        return None
    bpw = model.bytes_per_weight if model is not None and model.bytes_per_weight else None
    if bpw is None and meta.get("size") and meta.get("n_params"):
        bpw = float(meta["size"]) / float(meta["n_params"])
    kv = model.kv_per_token() if model is not None else None
    return ModelSize(params=float(params), bytes_per_weight=float(bpw or 2.0), kv_bytes_per_token=float(kv or 0.0))


def resolve(scenario: Any, meta: Mapping[str, Any] | None = None) -> tuple[Ceilings | None, ModelSize | None]:
    """(ceilings, model size) of a :class:`~loadtest.scenario.Scenario`; either None when unknown."""
    return ceilings_of(scenario.hardware), model_size(scenario.model, meta or {})


def resolve_run(run: Mapping[str, Any]) -> tuple[Ceilings | None, ModelSize | None]:
    """The same from run.json (its public scenario, and the model metadata profile stored there)."""
    scenario = run.get("scenario") or {}
    try:
        hardware = Hardware(**scenario["hardware"]) if scenario.get("hardware") else None
        model = ModelFacts(**scenario["model"]) if scenario.get("model") else None
    except Exception:  # noqa: BLE001 - an old or odd run.json: no roofline rather than no analysis
        return None, None
    return ceilings_of(hardware), model_size(model, run.get("model_meta") or {})
