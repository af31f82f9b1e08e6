"""Where a local stand-in came from: a bucket URL is shown, never the temporary folder standing for it.

``compare s3://… s3://…``, ``history s3://…/`` and their ``--json s3://…`` outputs work on local
copies in a temporary folder (:mod:`loadtest.storage.glue`), deleted when the command ends. What
the command printed and wrote named those copies (history.json's ``run``, compare.json's run
folders, "wrote /tmp/loadtest-s3-…/out/compare.json"): paths no one can open afterwards, in a file
kept in the bucket. The glue registers each copy here while it stands in; writers show
:func:`shown` of a path instead of the path. Nothing is registered without an ``s3://`` argument,
so a local path is shown as given.
"""

from __future__ import annotations

from pathlib import Path

#: Local stand-in root → the URL it stands for, while a command runs.
_STAND_INS: dict[Path, str] = {}


def stand_in(local: Path, url: str) -> None:
    """``local`` (a file or folder, and everything under it) stands for ``url`` until :func:`release`.

    As given and resolved: a staged run folder is relative (``reports/…``), and a path read back
    from it may be either."""
    for form in _forms(local):
        _STAND_INS[form] = str(url)


def release(local: Path) -> None:
    for form in _forms(local):
        _STAND_INS.pop(form, None)


def _forms(local: Path) -> set[Path]:
    return {Path(local), Path(local).resolve()}


def shown(path: Path | str) -> str:
    """``path`` as the user knows it: the URL its stand-in came from, else the path itself."""
    p = Path(path)
    for local, url in _STAND_INS.items():
        try:
            rel = p.relative_to(local)
        except ValueError:
            continue
        return f"{url.rstrip('/')}/{rel.as_posix()}" if rel.parts else url
    return str(path)
