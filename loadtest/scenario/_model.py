"""The whole scenario (:class:`Scenario`), and reading it from YAML."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from loadtest.errors import InputError
from loadtest.facts import Cost, Hardware, ModelFacts
from loadtest.paths import read_text
from loadtest.redact import REDACTED, looks_secret_field, looks_secret_name, public_url, query_secrets, redact_body
from loadtest.scenario._base import _Strict
from loadtest.scenario._errors import format_validation_error
from loadtest.scenario._load import Load
from loadtest.analysis.slo import SloSpec
from loadtest.scenario._target import Target
from loadtest.scenario._kinds import kind_problem
from loadtest.scenario._workload import RequestClass, Workload
from loadtest.scenario._yaml import DuplicateKeyError, read_yaml


class Scenario(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    target: Target = Target()
    workload: Workload = Workload()
    load: Load
    slo: SloSpec = SloSpec()
    #: Optional facts for the roofline and the cost (loadtest/facts.py); analysis only.
    hardware: Hardware | None = None
    model: ModelFacts | None = None
    cost: Cost | None = None

    @model_validator(mode="after")
    def _classes_inherit_the_error_budget(self) -> "Scenario":
        """A class SLO that names no ``max_error_rate`` (or floor) keeps the top-level one, not the default."""
        classes = []
        for c in self.workload.classes:
            if c.slo is not None:
                # and the valid-output floor likewise: a class SLO names what it changes
                kept = {k: getattr(self.slo, k) for k in ("max_error_rate", "min_valid_output_rate")
                        if k not in c.slo.model_fields_set}
                c = c.model_copy(update={"slo": c.slo.model_copy(update=kept)}) if kept else c
            classes.append(c)
        object.__setattr__(self, "workload", self.workload.model_copy(update={"classes": classes}))
        return self

    @model_validator(mode="after")
    def _fields_fit_the_api(self) -> "Scenario":
        """Streaming-only fields and SLOs on a request kind that does not stream (see _kinds.py)."""
        problem = kind_problem(self)
        if problem:
            raise ValueError(problem)
        return self

    @model_validator(mode="after")
    def _trace_needs_speedups(self) -> "Scenario":
        """A trace sets the arrivals and the lengths: it goes with ``load.speedups`` and nothing that competes."""
        trace, speedups = self.workload.trace, self.load.speedups
        if trace is not None and speedups is None:
            raise ValueError("workload.trace is replayed at load.speedups (for example speedups: [0.5, 1, 2]); give them instead of levels or rates")
        if speedups is not None and trace is None:
            raise ValueError("load.speedups replays workload.trace: give workload.trace {path, format}")
        if trace is not None:
            w = self.workload
            clash = [k for k, v in (("classes", w.classes), ("dataset", w.dataset), ("conversation", w.conversation), ("shared_prefix", w.shared_prefix)) if v]
            if clash:
                raise ValueError(f"workload.trace gives every request's lengths and prefixes; drop workload.{', workload.'.join(clash)}")
        return self

    def with_overrides(
        self,
        *,
        target: str | None = None,
        model: str | None = None,
        levels: list[int] | None = None,
        rates: list[float] | None = None,
        level_duration_s: float | None = None,
        server_metrics: bool | None = None,
    ) -> "Scenario":
        """Apply command-line overrides, re-validating the result."""
        data = self.model_dump()
        if target is not None:
            data["target"]["base_url"] = target
        if model is not None:
            data["target"]["model"] = model
        if levels is not None:
            data["load"].update(levels=levels, start=None, step=None, max=None, rates=None,
                                rate_start=None, rate_step=None, rate_max=None)
        if rates is not None:
            data["load"].update(rates=rates, rate_start=None, rate_step=None, rate_max=None,
                                levels=None, start=None, step=None, max=None)
        if level_duration_s is not None:
            data["load"]["level_duration_s"] = level_duration_s
        if server_metrics is not None:
            data["target"]["metrics"]["enabled"] = server_metrics
        return parse_scenario(data, source="command line")

    def public_dict(self) -> dict[str, Any]:
        """The scenario as written to run.json: never holds a secret (only env var names).

        Headers whose names look secret, URL userinfo and token-like query values
        are replaced; :mod:`loadtest.redact` scrubs the values themselves too.
        """
        data = self.model_dump(mode="json")
        target = data["target"]
        extra = target["secret_fields"]
        target["headers"] = {k: (REDACTED if looks_secret_name(k) or looks_secret_field(k, extra) else v)
                             for k, v in target["headers"].items()}
        target["base_url"] = public_url(target["base_url"])
        secret = set(query_secrets(target["query"], extra))
        target["query"] = {k: (REDACTED if v in secret else v) for k, v in target["query"].items()}
        workload = data["workload"]
        workload["extra_body"] = redact_body(workload["extra_body"], extra)
        for c in workload.get("classes") or []:
            if c.get("extra_body") is not None:
                c["extra_body"] = redact_body(c["extra_body"], extra)
        return data

    def request_bodies(self) -> list[dict[str, Any]]:
        """The ``extra_body`` mappings (the workload's and each class's): where body secrets live."""
        return [self.workload.extra_body] + [c.extra_body for c in self.workload.classes if c.extra_body]


RequestClass.model_rebuild()
Workload.model_rebuild()
Scenario.model_rebuild()


def parse_scenario(data: Any, source: str = "scenario") -> Scenario:
    if not isinstance(data, dict):
        raise InputError(f"{source}: the top level must be a mapping of keys (name, target, workload, load, slo)")
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        raise InputError(f"{source}: {format_validation_error(err)}") from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; every problem is one :class:`InputError` line."""
    path = Path(path)
    text = read_text(path, "scenario", kind="scenario file")
    try:
        data = read_yaml(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        # a duplicated key names both of its lines itself
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark and not isinstance(err, DuplicateKeyError) else ""
        problem = getattr(err, "problem", None) or "invalid YAML"
        raise InputError(f"{path}: {problem}{where}") from None
    _resolve_dataset_paths(data, path.parent)
    return parse_scenario(data, source=str(path))


def _resolve_dataset_paths(data: Any, folder: Path) -> None:
    """Make every ``dataset.path`` absolute, relative to the scenario file's folder.

    Done on the raw YAML, before validation, so the check that the file exists
    and the run.json copy both see the path that is actually read (workers get
    the scenario from a temporary file elsewhere).
    """
    workload = data.get("workload") if isinstance(data, dict) else None
    if not isinstance(workload, dict):
        return
    holders = [workload] + [c for c in workload.get("classes") or [] if isinstance(c, dict)]
    for holder, key in [(h, "dataset") for h in holders] + [(workload, "trace")]:
        dataset = holder.get(key)
        if isinstance(dataset, dict) and isinstance(dataset.get("path"), str):
            p = Path(dataset["path"]).expanduser()
            # abspath, not resolve(): a symlink is named as written, so its mistakes are too
            dataset["path"] = str(p if p.is_absolute() else Path(os.path.abspath(folder / p)))
