"""The documentation builds, its links resolve, and nothing the tool offers goes undocumented.

Four checks, each against the real thing rather than a list kept by hand:

- ``mkdocs build --strict`` of the site (``mkdocs.yml``, ``docs/``) into a temporary folder: a
  broken link, a missing anchor or a page left out of the navigation fails it;
- every relative link in ``README.md``, ``docs/*.md``, ``benchmarks/RESULTS.md`` and
  ``CHANGELOG.md`` names a file that exists and, for a Markdown file, a heading in it (MkDocs
  checks only ``docs/``, and GitHub resolves the README's links from the repository root);
- every option of every ``loadtest`` command, read from the real argparse parsers (hidden ones
  included: the Locust operator passes them), is named in the README or in ``docs/``;
- every key of a real ``summary.json`` is listed in the summary.json reference
  (``docs/run-folder.md``). The runs are made here, against the real mock on 127.0.0.1: a closed
  loop with request classes, conversations, a roofline and cost, and an open loop with cost, so
  the optional blocks are present.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Any, Iterator

import pytest
import yaml

from loadtest.cli import build_parser
from loadtest.mock import MockServer

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REFERENCE = DOCS / "run-folder.md"


def _doc_pages() -> list[Path]:
    return sorted(p for p in DOCS.glob("*.md"))


#: Repository pages the site includes as its own (see docs/_hooks/repo_links.py): documentation too.
SITE_PAGES_OUTSIDE_DOCS = [ROOT / "loadtest" / "mock" / "MODEL.md"]


def _all_docs_text() -> str:
    return "\n".join(p.read_text() for p in [ROOT / "README.md", *_doc_pages(), *SITE_PAGES_OUTSIDE_DOCS])


# ---------------------------------------------------------------- the site builds, strictly


def test_mkdocs_builds_strict(tmp_path: Path) -> None:
    """The site builds with --strict: every link and anchor inside docs/ resolves, every page is in the nav."""
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(ROOT / "mkdocs.yml"),
         "--site-dir", str(tmp_path / "site")],
        capture_output=True, text=True, timeout=240, cwd=ROOT, stdin=subprocess.DEVNULL,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # keep a failure's output to the build's own lines
    )
    assert result.returncode == 0, result.stderr[-4000:]
    site = tmp_path / "site"
    for page in ["architecture", "method", "run-folder", "results", "changelog"]:
        assert (site / page / "index.html").is_file(), f"{page} was not built"
    # the pages the hook brings in from outside docs/ are really there, not empty shells
    assert "Timing fidelity" in (site / "results" / "index.html").read_text()


# ---------------------------------------------------------------- links resolve, on GitHub too

_LINK = re.compile(r"(?<!!)\[[^\]\n]+\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^\s*(```|~~~)")


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"<[^>]+>", "", heading).strip().lower()
    text = text.replace("`", "")
    text = "".join(ch for ch in text if ch.isalnum() or ch in " -_" or unicodedata.category(ch).startswith("L"))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, as GitHub numbers repeated ones."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    in_fence = False
    for line in path.read_text().splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m and not in_fence:
            slug = github_slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(path: Path) -> Iterator[tuple[int, str]]:
    in_fence = False
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if _FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for m in _LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            yield number, m.group(1)


LINKED_FILES = ["README.md", "CHANGELOG.md", "benchmarks/RESULTS.md", "loadtest/mock/MODEL.md"] + [
    str(p.relative_to(ROOT)) for p in _doc_pages()
]


@pytest.mark.parametrize("name", LINKED_FILES)
def test_relative_links_resolve(name: str) -> None:
    """Each relative link names an existing file, and an existing heading when it has an anchor."""
    source = ROOT / name
    broken = []
    for number, target in links(source):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # a URL: not ours to check offline
        path, _, anchor = target.partition("#")
        dest = (source.parent / path).resolve() if path else source
        if not dest.exists():
            broken.append(f"{name}:{number}: {target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{name}:{number}: {target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, "\n".join(broken)


def test_readme_stays_short_and_links_the_architecture_first() -> None:
    """The README is the front door (about 250 lines); the architecture page is linked before any section."""
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 260
    before_first_section = text.split("\n## ", 1)[0]
    assert "(docs/architecture.md)" in before_first_section
    assert text.lstrip().startswith("# loadtest\n\n```sh\nmake demo")


def test_github_slugs_match_what_the_docs_link() -> None:
    """The anchor rule used above is GitHub's (a wrong rule would make the link check pass or fail for nothing)."""
    assert github_slug("Live metrics: Prometheus, the Pushgateway and Grafana") == \
        "live-metrics-prometheus-the-pushgateway-and-grafana"
    assert github_slug("The regression gate: `loadtest compare`") == "the-regression-gate-loadtest-compare"
    assert github_slug("Results in object storage (S3)") == "results-in-object-storage-s3"


# ---------------------------------------------------------------- every flag is documented


def _option_strings(parser: argparse.ArgumentParser, command: str = "loadtest") -> Iterator[tuple[str, str]]:
    for action in parser._actions:  # argparse keeps no public list of a parser's options
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _option_strings(sub, f"{command} {name}")
        for option in action.option_strings:
            if option.startswith("--") and option != "--help":
                yield command, option


def test_every_cli_flag_is_documented() -> None:
    """Each long option of each command appears in the README or the site's pages (as `--flag`, whole word)."""
    text = _all_docs_text()
    options = sorted(set(_option_strings(build_parser())))
    assert len(options) > 60, "the parser walk found too few options to be the real CLI"
    missing = [f"{command} {option}" for command, option in options
               if not re.search(re.escape(option) + r"(?![\w-])", text)]
    assert not missing, "documented nowhere (README.md or docs/):\n" + "\n".join(missing)


# ---------------------------------------------------------------- every summary.json key is documented

#: Dicts whose keys are data, not names the tool defines: written as `<placeholder>` in the reference.
#: (path of the dict with [] for list items) -> placeholder
DATA_KEYED = {
    "capacity.classes": "<class>",
    "classes": "<class>",
    "levels[].classes": "<class>",
    "levels[].server": "<metric>",
    "levels[].errors_by_kind": "<kind>",
    "prompt_token_source": "<source>",
    "token_source.requests": "<source>",
    "levels[].ttft_by_turn": "<turn>",
}
#: Values that are copies of the scenario (documented field by field in docs/scenarios.md) or
#: quantile tables keyed by the quantile: the reference names the block, not each of its keys.
OPAQUE = {"fingerprint.workload", "slo", "classes.<class>.slo", "levels[].client.stamp_delay_ms",
          "levels[].client.send_delay_ms", "cost.forecast.daily_shape", "datasets[]", "fingerprint.datasets[]",
          "fingerprint.levels", "autoscaling.options", "fingerprint.classes"}


#: Blocks with the same keys as another block: the reference describes the keys once, for the
#: block on the right, and says where else they appear.
FOLDS = [
    (re.compile(r"^levels\[\]\.classes\.<class>\."), "levels[]."),           # a class's level = a level
    (re.compile(r"^capacity\.classes\.<class>\."), "capacity."),               # a class's capacity = the capacity
    (re.compile(r"^levels\[\]\.ttft_by_turn\.<turn>\."), "levels[].<metric>."),  # a turn's TTFT = a metric's stats
    (re.compile(r"^levels\[\]\.(?:ttft|ttfb|itl|tpot|e2e)_ms\."), "levels[].<metric>."),
]


def fold(path: str) -> str:
    for pattern, replacement in FOLDS:
        path = pattern.sub(replacement, path)
    return path


def summary_keys(value: Any, path: str = "") -> set[str]:
    """Every key path of a summary.json, with data-valued keys folded into their placeholder."""
    out: set[str] = set()
    if path in OPAQUE:
        return out
    if isinstance(value, dict):
        for key, item in value.items():
            name = DATA_KEYED.get(path, key)
            child = f"{path}.{name}" if path else name
            child = fold(child)
            out.add(child)
            out |= summary_keys(item, child)
    elif isinstance(value, list):
        for item in value:
            out |= summary_keys(item, f"{path}[]")
    return out


def _mock_run(folder: Path, mock: MockServer, name: str, load: dict[str, Any], extra: dict[str, Any],
              flags: list[str]) -> dict[str, Any]:
    scenario = {
        "name": name,
        "target": {"base_url": mock.base_url, "model": "mock-model", "api": "chat", "timeout_s": 10,
                   # scraped five times a second: a level of a few seconds still gets several scrapes
                   "metrics": {"interval_s": 0.2}},
        "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 8},
        "load": {"warmup_s": 0.5, "warmup_requests": 0, "level_duration_s": 3,
                 "min_level_duration_s": 3, "max_level_duration_s": 3,
                 "client_limits": {"loop_lag_p99_ms": 50, "reader_batch_p99_ms": 50, "cpu_pct": 100}, **load},
        # limits far above the mock's few milliseconds, on percentiles a 3 s level can decide (a
        # p50 needs about 8 requests; ITL samples come from every chunk): every level passes, so
        # the capacity, cost and autoscaling blocks are filled in, not left null
        "slo": {"ttft_ms": {"p50": 1000}, "itl_ms": {"p95": 1000}, "max_error_rate": 0.5},
        **extra,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = folder / name
    result = subprocess.run(
        [sys.executable, "-m", "loadtest", "run", str(path), "--out", str(out), *flags],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads((out / "summary.json").read_text())


def make_summaries(folder: Path) -> list[dict[str, Any]]:
    """Two short real runs against the mock (about 12 s each): closed loop with every optional block, and open loop."""
    with MockServer(["--decode-base-ms", "5", "--decode-per-seq-ms", "1", "--prefill-per-token-ms", "0"]) as mock:
        closed = _mock_run(folder, mock, "closed", {"levels": [1, 2]}, {
            "workload": {"prompt_tokens": {"mean": 16, "stddev": 0}, "max_tokens": 8,
                         "conversation": {"turns": 2},
                         "classes": [{"name": "a", "weight": 1, "slo": {"ttft_ms": {"p50": 1000}}},
                                     {"name": "b", "weight": 1}]},
            "hardware": {"accelerator": "H100-SXM"},
            "model": {"params_b": 1, "kv_bytes_per_token": 1024},
            "cost": {"usd_per_hour": 2.0, "daily_shape": [1.0] * 12 + [0.5] * 12},
        }, ["--peak-users", "10"])
        opened = _mock_run(folder, mock, "open", {"rates": [20, 40]}, {"cost": {"usd_per_hour": 2.0}},
                           ["--peak-rps", "10"])
    return [closed, opened]


@pytest.fixture(scope="module")
def real_summaries(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    return make_summaries(tmp_path_factory.mktemp("docs-runs"))


def documented_summary_keys() -> set[str]:
    """The key paths the reference lists: every `code` span in docs/run-folder.md that looks like one."""
    text = REFERENCE.read_text()
    return {m.group(1) for m in re.finditer(r"`([A-Za-z_<][\w.\[\]<>:-]*)`", text)}


def test_summary_keys_fold_data_into_placeholders() -> None:
    """The folding rule itself: class names and metric names are data; the keys under them are not."""
    keys = summary_keys({"capacity": {"classes": {"chat": {"verdict": "found"}}},
                         "levels": [{"server": {"vllm:x": {"p50": 1}}, "classes": {"chat": {"ttft_ms": {"p95": 2}}}}]})
    assert keys == {"capacity", "capacity.classes", "capacity.classes.<class>", "capacity.verdict",
                    "levels", "levels[].server", "levels[].server.<metric>", "levels[].server.<metric>.p50",
                    "levels[].classes", "levels[].classes.<class>", "levels[].ttft_ms", "levels[].<metric>.p95"}


def test_every_summary_json_key_is_documented(real_summaries: list[dict[str, Any]]) -> None:
    """Each key path of real summary.json files is listed in the summary.json reference."""
    found: set[str] = set()
    for summary in real_summaries:
        found |= summary_keys(summary)
    # the runs really carried the optional blocks this check is meant to cover
    for key in ["levels[].open_loop.offered_rps", "capacity.classes.<class>", "cost.forecast.peak_replicas",
                "levels[].ttft_by_turn.<turn>", "decode_fit.knee_sequences", "levels[].server.<metric>.p50",
                "autoscaling.signals[].threshold", "levels[].bound.memory_floor_ms"]:
        assert key in found, f"the runs did not produce {key}; the check would not cover it"
    missing = sorted(found - documented_summary_keys())
    assert not missing, "summary.json keys missing from docs/run-folder.md:\n" + "\n".join(missing)


# ---------------------------------------------------------------- nothing was lost in the move

#: The last commit with the long README (issue 24 moved its reference into docs/).
LONG_README_COMMIT = "74e73b2"


def test_nothing_of_the_long_readme_was_lost() -> None:
    """Every `--flag` and every `code` name of the 1,709-line README is still in the README or the site's pages.

    The move was meant to be verbatim; this holds the pages to it. It reads the old README from
    git, so it needs the repository's history (a shallow clone without that commit skips it).
    """
    old = subprocess.run(["git", "show", f"{LONG_README_COMMIT}:README.md"], capture_output=True, text=True,
                         cwd=ROOT, stdin=subprocess.DEVNULL)
    if old.returncode != 0:
        pytest.skip(f"commit {LONG_README_COMMIT} is not in this clone's history")
    now = _all_docs_text() + "\n".join(p.read_text() for p in [ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "RESULTS.md"])
    flags = set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", old.stdout))
    spans = set(re.findall(r"`([^`\n]+)`", old.stdout))
    assert len(flags) > 90 and len(spans) > 900, "the old README did not parse as expected"
    lost = sorted(f for f in flags if not re.search(re.escape(f) + r"(?![\w-])", now))
    lost += sorted(f"`{s}`" for s in spans if s not in now)
    assert not lost, "in the README at 74e73b2 but nowhere now:\n" + "\n".join(lost)
