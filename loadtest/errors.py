"""Errors the CLI turns into one clear line and an exit code (never a traceback)."""

from __future__ import annotations


class LoadtestError(Exception):
    """Base class: ``str(err)`` is the one line the user sees."""

    exit_code = 1


class InputError(LoadtestError):
    """Bad input from the user: a scenario, a flag, a file. Exit code 2."""

    exit_code = 2


class TargetError(LoadtestError):
    """The target server could not be used (unreachable, 401/404, not streaming). Exit code 3."""

    exit_code = 3
