"""The documentation builds, its links resolve, and nothing the tool offers goes undocumented.

Four checks, each against the real thing rather than a list kept by hand:

- ``mkdocs build --strict`` of the site (``mkdocs.yml``, ``docs/``) into a temporary folder: a
  broken link, a missing anchor or a page left out of the navigation fails it;
- every relative link in ``README.md``, ``docs/*.md``, ``benchmarks/RESULTS.md`` and
  ``CHANGELOG.md`` names a file that exists and, for a Markdown file, a heading in it (MkDocs
  checks only ``docs/``, and GitHub resolves the README's links from the repository root);
- every option of every ``loadtest`` command, read from the real argparse parsers (hidden ones
  included: the Locust operator passes them), is named in the README or in ``docs/``;
- nothing of the long README at ``74e73b2`` was lost when its reference moved to ``docs/``.

Every ``summary.json`` key of real runs is checked against the reference in
``tests/test_docs_summary_keys.py`` (it needs the mock and two short runs).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path
from typing import Iterator

import pytest

from loadtest.cli import build_parser

#: Nothing here measures time: it runs in make test's parallel pass.
pytestmark = pytest.mark.untimed

# the repository root: the folder above this file that holds mkdocs.yml (wherever tests/ nests it)
ROOT = next(p for p in Path(__file__).resolve().parents if (p / "mkdocs.yml").is_file())
DOCS = ROOT / "docs"


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
