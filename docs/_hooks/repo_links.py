"""MkDocs hook: one set of Markdown files that reads right on GitHub and on the built site.

The pages in ``docs/`` link to files outside it the way GitHub resolves them
(``../benchmarks/RESULTS.md``, ``../examples/nightly-regression.yml``), because
the README and the repository browser are where most readers meet them. MkDocs
only knows the files under ``docs/``, so on its own it would call every such
link broken. This hook, for the site only:

- adds the repository's own Markdown pages that belong in the site
  (:data:`INCLUDED`: the benchmark results, the changelog, the mock's model) as
  pages of their own;
- rewrites a relative link to one of them into a link to that page, and a link
  to any other file of the repository that exists into its name in code (the
  site has no copy of the source tree to link to);
- leaves every other link alone, so a link to a file that does not exist still
  reaches MkDocs' own validation and fails ``mkdocs build --strict``.

Links inside an included page are resolved from that file's own folder, as
GitHub resolves them.
"""

from __future__ import annotations

import logging
import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File, Files

log = logging.getLogger("mkdocs.hooks.repo_links")

# repository path -> the page it becomes on the site (top level of the site)
INCLUDED = {
    "benchmarks/RESULTS.md": "results.md",
    "CHANGELOG.md": "changelog.md",
    "loadtest/mock/MODEL.md": "mock-model.md",
}
_SITE_TO_REPO = {site: repo for repo, site in INCLUDED.items()}

# [text](target) outside code spans; targets here never hold spaces or parentheses
_LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]+)\]\((?P<target>[^)\s]+)\)")
_FENCE = re.compile(r"^(```|~~~)")


def _repo_root(config) -> Path:
    return Path(config["docs_dir"]).resolve().parent


def on_files(files: Files, config) -> Files:
    """Add the included repository pages to the site."""
    root = _repo_root(config)
    for repo_path, site_path in INCLUDED.items():
        src = root / repo_path
        if not src.is_file():
            log.warning("included page %s does not exist", repo_path)
            continue
        files.append(File.generated(config, site_path, abs_src_path=str(src)))
    return files


def _rewrite(target: str, text: str, page_repo_path: str, root: Path) -> str | None:
    """The replacement for one link, or None to keep it as written."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#") or target.startswith("/"):
        return None
    path, _, anchor = target.partition("#")
    if not path:
        return None
    repo_path = posixpath.normpath(posixpath.join(posixpath.dirname(page_repo_path), path))
    suffix = f"#{anchor}" if anchor else ""
    if repo_path in INCLUDED:
        return f"[{text}]({INCLUDED[repo_path]}{suffix})"
    if repo_path.startswith("docs/"):
        site_path = repo_path[len("docs/"):]
        if page_repo_path.startswith("docs/") and site_path == path:
            return None  # already a site link
        return f"[{text}]({site_path}{suffix})"
    if repo_path.startswith("../") or repo_path == "..":
        return None  # outside the repository: let MkDocs report it
    if (root / repo_path).exists():
        inner = text.strip("`")
        return f"`{inner}`" if text.startswith("`") or inner == repo_path else f"{text} (`{repo_path}`)"
    return None


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Rewrite the page's links that leave ``docs/`` (see the module docstring)."""
    root = _repo_root(config)
    src_uri = page.file.src_uri
    page_repo_path = _SITE_TO_REPO.get(src_uri, f"docs/{src_uri}")
    out, in_fence = [], False
    for line in markdown.split("\n"):
        if _FENCE.match(line.lstrip()):
            in_fence = not in_fence
        if not in_fence and "](" in line:
            line = _LINK.sub(lambda m: _rewrite(m["target"], m["text"], page_repo_path, root) or m[0], line)
        out.append(line)
    return "\n".join(out)
