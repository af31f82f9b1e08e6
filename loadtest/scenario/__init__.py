"""A scenario file: YAML in, a validated, typed :class:`Scenario` out.

Validation is pydantic's; what this package adds is the translation of its
errors into one line that names the YAML path of the bad field
(``load.levels[2]: must be a positive integer``), because the person reading it
is editing a YAML file, not a Python model.

The models live in private modules, one section of the YAML each:
``_target`` (``target:``), ``_workload`` (``workload:``), ``_load`` (``load:``),
``_model`` (the whole file and its reading), ``_yaml`` (the YAML loader, which
refuses a key given twice) and ``_errors`` (the one-line messages). The ``slo:`` block is the one SLO type the analysis uses too,
:class:`~loadtest.analysis.slo.SloSpec`. Import from here.
"""

from loadtest.analysis.slo import SloSpec
from loadtest.scenario._base import MAX_RATE_RPS, MAX_USERS, number_text
from loadtest.scenario._errors import format_validation_error
from loadtest.scenario._load import ClientLimits, Load
from loadtest.scenario._model import Scenario, load_scenario, parse_scenario
from loadtest.scenario._target import ServerMetrics, Target
from loadtest.scenario._workload import (
    Conversation,
    Dataset,
    RequestClass,
    SharedPrefix,
    TokenDistribution,
    Workload,
    typical_tokens,
)


__all__ = [
    "MAX_RATE_RPS",
    "MAX_USERS",
    "ClientLimits",
    "Conversation",
    "Dataset",
    "Load",
    "RequestClass",
    "Scenario",
    "ServerMetrics",
    "SharedPrefix",
    "SloSpec",
    "Target",
    "TokenDistribution",
    "Workload",
    "format_validation_error",
    "load_scenario",
    "number_text",
    "parse_scenario",
    "typical_tokens",
]
