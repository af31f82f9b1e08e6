"""The workload fingerprint: what must be equal for two runs to be compared at all.

Two runs can only be compared when they asked the server for the same work at
the same load: the same API, the same prompt and output length distributions
(and the same dataset, by content hash), the same levels (users; or rates, or
trace speedups, with how the arrivals are drawn: :func:`rate_shape`), level
duration and warm-up. A faster p95 from shorter prompts is not an improvement, so runs whose
fingerprints differ are refused rather than compared.

Things that may legitimately change between a baseline and a candidate (the
server, the model name, the SLO, the tool version, the seed) are deliberately
*not* in the fingerprint; ``compare`` warns about some of them instead.

The fingerprint is computed from the resolved scenario that run.json holds,
so runs written before it existed get one too. New runs also store it in
``run.json`` (``compare_fingerprint``) and ``summary.json`` (``fingerprint``),
where the dataset's hash is the one taken when the run was made. (run.json's
``workload_fingerprint`` is the workload's own record of datasets and classes,
see :func:`loadtest.workload.workload_fingerprint`; it has no ``hash``. Runs
written before ``compare_fingerprint`` existed lost the compare fingerprint to
that key, so for them the hash is recomputed from the scenario.)
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Mapping

from loadtest.scenario import Load
from loadtest.scenario import Workload

#: Workload keys that change *which* prompts are drawn, not their distribution.
IGNORED_WORKLOAD_KEYS = frozenset({"seed", "salt"})
#: A request class's keys that say how it is judged, not what it asks: a class's SLO may change between a
#: baseline and a candidate as the top-level one may (a changed class limit refused the comparison).
CLASS_JUDGEMENT_KEYS = frozenset({"slo"})
#: Keys whose string value names a dataset file; its content hash joins the fingerprint.
DATASET_KEYS = frozenset({"dataset", "path", "file"})
FINGERPRINT_VERSION = 1


def fingerprint(scenario: Mapping[str, Any], *, base_dir: Path | None = None) -> dict[str, Any]:
    """The fingerprint of a resolved scenario (``run.json["scenario"]``), with its ``hash``."""
    target = scenario.get("target") or {}
    workload = scenario.get("workload") or {}
    load = scenario.get("load") or {}
    body: dict[str, Any] = {
        "api": target.get("api", "chat"),
        "workload": _normalize(_work_only({k: v for k, v in _with_defaults(workload).items()
                                           if k not in IGNORED_WORKLOAD_KEYS})),
        "levels": concurrency_levels(load),
        "level_duration_s": _number(load.get("level_duration_s")),
        "warmup_s": _number(load.get("warmup_s")),
        "warmup_requests": load.get("warmup_requests"),
        # how long a decided level may be cut short, and an undecided one extended (null: the defaults)
        "min_level_duration_s": _number(load.get("min_level_duration_s")),
        "max_level_duration_s": _number(load.get("max_level_duration_s")),
        **rate_shape(load),
    }
    body = {k: v for k, v in body.items() if v is not None}
    datasets = _dataset_hashes(workload, base_dir)
    if datasets:
        body["datasets"] = datasets
    return {"version": FINGERPRINT_VERSION, **body, "hash": _digest(body)}


def fingerprint_of_run(run: Mapping[str, Any], summary: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A run's fingerprint, recomputed from its resolved scenario by *this* version's rules.

    Recomputing keeps runs made by different versions comparable (a newer
    version may spell a field differently). What cannot be recomputed is
    taken from the stored fingerprint: the dataset hashes taken when the run
    was made (the file may have changed since). Without a scenario (a bare
    summary.json) the stored fingerprint is all there is.
    """
    stored = next(
        (dict(s) for s in (run.get("compare_fingerprint"), run.get("workload_fingerprint"),
                           (summary or {}).get("fingerprint"))
         if isinstance(s, Mapping) and s.get("hash")),
        None,
    )
    scenario = run.get("scenario")
    if not isinstance(scenario, Mapping) or not scenario:
        return _judgement_out(stored) if stored is not None else fingerprint({})
    fresh = fingerprint(scenario)
    if stored is not None and stored.get("datasets"):
        body = {k: v for k, v in fresh.items() if k not in ("hash", "version")}
        body["datasets"] = stored["datasets"]
        fresh = {"version": FINGERPRINT_VERSION, **body, "hash": _digest(body)}
    return fresh


def differences(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    """Human lines for every fingerprint field that differs, e.g. ``workload.max_tokens: 64 → 32``.

    A dataset hash that only one side has (the file was gone when an old run's
    fingerprint was recomputed) is not a difference: the paths still are.
    """
    a, b = _strip(baseline), _strip(candidate)
    if not (a.get("datasets") and b.get("datasets")):
        a.pop("datasets", None)
        b.pop("datasets", None)
    out: list[str] = []
    _diff(a, b, "", out)
    return out


def unverified_datasets(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> bool:
    """True when a dataset is named but only one run has its hash (it could not be checked)."""
    return bool(baseline.get("datasets")) != bool(candidate.get("datasets"))


def concurrency_levels(load: Mapping[str, Any]) -> list[int]:
    """The configured sweep: ``levels``, or the levels that ``start/step/max`` generates."""
    try:
        return Load.model_validate(dict(load)).concurrency_levels()
    except Exception:  # a run.json from another version: take what it says literally
        levels = load.get("levels")
        return [int(x) for x in levels] if isinstance(levels, list) else []


def rate_shape(load: Mapping[str, Any]) -> dict[str, Any]:
    """An open loop's or a trace replay's load beyond its durations; nothing in a closed loop.

    Its levels are rates (``rates``, or those ``rate_start/step/max`` generates) or speedups
    (``speedups``), as a closed loop's ``levels`` are its users; and how the arrivals are drawn
    (``arrival``, gamma's ``burstiness``) and capped (``max_in_flight``, beyond which an arrival
    fails as ``dropped``) shape the queue every latency is measured through: bursty arrivals at
    the same mean rate are other work. ``arrival_seed`` is left out, as ``workload.seed`` is: it
    draws other send times from the same process. A closed loop's fingerprint (and hash) stays
    as it was: none of these keys appear in it.
    """
    try:
        model = Load.model_validate(dict(load))
    except Exception:  # a run.json from another version: take what it says literally
        given = {k: load.get(k) for k in ("rates", "speedups", "arrival", "burstiness", "max_in_flight")}
        if given["rates"] is None and given["speedups"] is None:
            return {}
        return {k: _normalize(v) for k, v in given.items() if v is not None}
    if model.trace_replay:
        return {"speedups": [_number(float(s)) for s in model.speedups or []], "max_in_flight": model.max_in_flight}
    if not model.open_loop:
        return {}
    shape: dict[str, Any] = {"rates": [_number(float(r)) for r in model.rate_levels()], "arrival": model.arrival,
                             "max_in_flight": model.max_in_flight}
    if model.burstiness is not None:
        shape["burstiness"] = _number(float(model.burstiness))
    return shape


# -- helpers --------------------------------------------------------------------------------


def _strip(fp: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fp.items() if k not in ("hash", "version")}


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted(set(a) | set(b), key=str):
            _diff(a.get(key), b.get(key), f"{path}.{key}" if path else str(key), out)
        return
    if a != b:
        out.append(f"{path}: {_show(a)} → {_show(b)}")


def _show(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    return str(value)


def _with_defaults(workload: Mapping[str, Any]) -> dict[str, Any]:
    """The workload with this version's defaults filled in.

    A run made before a workload field existed did not record it; it ran with
    the default, so it must not differ from a newer run that states it.
    """
    try:
        return Workload.model_validate(dict(workload)).model_dump(mode="json")
    except Exception:  # written by another version: compare what it says
        return dict(workload)


def _judgement_out(stored: dict[str, Any]) -> dict[str, Any]:
    """A stored fingerprint by this version's rules: a class's SLO left out (older runs stored it), rehashed."""
    workload = stored.get("workload")
    if not isinstance(workload, Mapping) or not isinstance(workload.get("classes"), list):
        return stored
    body = {k: v for k, v in stored.items() if k not in ("hash", "version")}
    body["workload"] = _work_only(dict(workload))
    return {"version": FINGERPRINT_VERSION, **body, "hash": _digest(body)}


def _work_only(workload: dict[str, Any]) -> dict[str, Any]:
    """The workload without what judges it: each request class's SLO (:data:`CLASS_JUDGEMENT_KEYS`)."""
    classes = workload.get("classes")
    if not isinstance(classes, list):
        return workload
    return {**workload, "classes": [{k: v for k, v in c.items() if k not in CLASS_JUDGEMENT_KEYS}
                                    if isinstance(c, Mapping) else c for c in classes]}


def _normalize(value: Any) -> Any:
    """One spelling per meaning: ``{mean: 64, stddev: 0}`` is ``64``; ints and floats compare equal;
    an empty or null field is the same as an absent one."""
    if isinstance(value, Mapping):
        items = {str(k): _normalize(v) for k, v in value.items() if v not in (None, {}, [])}
        if set(items) == {"mean", "stddev"} and not items["stddev"]:
            return items["mean"]
        return items
    if isinstance(value, list):
        return [_normalize(v) for v in value]
    return _number(value) if isinstance(value, float) else value


def _number(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _digest(body: Mapping[str, Any]) -> str:
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _dataset_hashes(workload: Mapping[str, Any], base_dir: Path | None) -> dict[str, str]:
    """SHA-256 of every dataset file the workload names (found anywhere in its tree)."""
    found: dict[str, str] = {}

    def walk(node: Any) -> None:
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in DATASET_KEYS and isinstance(value, str):
                    path = Path(value)
                    if not path.is_absolute() and base_dir is not None:
                        path = base_dir / path
                    if path.is_file():
                        found[value] = _dataset_sha256(path)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(workload)
    return found


def _dataset_sha256(path: Path) -> str:
    """The file's SHA-256; when its rows name image files, the hash of it and of each image in turn.

    Images are prefill: the same jsonl with other pictures is other work, so it must not
    fingerprint the same. A dataset without images keeps its plain file hash (the one runs
    made before this stored).
    """
    plain, names_images = _file_sha256(path, b'"image')
    if not names_images:
        return plain
    # dataset_images: only for a dataset that names images (it reads the rows, the hash above does not)
    from loadtest.workload.dataset_images import image_files

    files = image_files(path)
    if not files:
        return plain
    digest = hashlib.sha256(plain.encode())
    for ref, file in files:
        digest.update(b"\0" + ref.encode() + b"\0" + _file_sha256(file)[0].encode())
    return digest.hexdigest()


def _file_sha256(path: Path, marker: bytes = b"") -> tuple[str, bool]:
    """The file's SHA-256 and whether ``marker`` occurs in it (found across read blocks too)."""
    digest = hashlib.sha256()
    found, tail = False, b""
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
            if marker and not found:
                found = marker in tail + block
                tail = block[-len(marker):]
    return digest.hexdigest(), found
