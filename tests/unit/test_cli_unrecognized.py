"""An argument a sub-command does not know is said in the sub-command's own form, exit 2.

A trial: ``loadtest analyze RUN --bogus`` printed ``loadtest: error: unrecognized arguments:
--bogus (see loadtest --help)``, where every other mistake in analyze's arguments reads
``loadtest analyze: error: ... (see loadtest analyze --help)``: argparse hands a sub-command's
unknown words up to the top parser. Only the arguments are parsed here: each refusal comes
before any command runs, so nothing is read or sent.
"""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from loadtest.cli import build_parser, main

#: Each sub-command (and verb) with arguments it accepts, so the unknown word is the only mistake.
VALID = {
    "run": ["s.yaml"],
    "worker": ["s.yaml"],
    "validate": ["s.yaml"],
    "analyze": ["RUN"],
    "compare": ["A", "B"],
    "history": ["RUN"],
    "profile": ["s.yaml"],
    "mock": [],
    "k8s render": ["s.yaml"],
    "baseline exists": ["DIR"],
    "baseline promote": ["RUN", "DIR"],
    "trace synth": ["out.jsonl", "--rate", "1", "--duration-s", "1"],
}


def _cli(*args: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as stop:  # argparse's refusals end in SystemExit
            code = int(stop.code)
    return code, err.getvalue()


def _leaf_commands(parser: argparse.ArgumentParser, prefix: str = "") -> list[str]:
    """Every command a user can run (``k8s render``, not ``k8s``)."""
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out += _leaf_commands(sub, f"{prefix}{name} ") or [f"{prefix}{name}"]
    return out


def test_the_cases_cover_every_command():
    assert sorted(_leaf_commands(build_parser())) == sorted(VALID)


#: The cases: history takes any number of folders, so a stray word there is one more folder, not unknown.
CASES = [(command, unknown) for command in sorted(VALID) for unknown in (["--bogus"], ["--bogus", "x"], ["stray"])
         if not (command == "history" and unknown == ["stray"])]


@pytest.mark.parametrize(("command", "unknown"), CASES, ids=[f"{c}-{' '.join(u)}" for c, u in CASES])
def test_an_unknown_argument_is_said_by_the_sub_command(command, unknown):
    code, err = _cli(*command.split(), *VALID[command], *unknown)
    assert code == 2
    assert err == (f"loadtest {command}: error: unrecognized arguments: {' '.join(unknown)} "
                   f"(see loadtest {command} --help)\n")


def test_an_unknown_word_before_a_verb_is_said_by_the_command_that_has_the_verb():
    code, err = _cli("k8s", "--bogus", "render", "s.yaml")
    assert code == 2 and err.startswith("loadtest k8s: error: unrecognized arguments: --bogus (see loadtest k8s --help)")


def test_an_unknown_word_before_the_command_is_still_the_top_parser_s():
    code, err = _cli("--bogus", "analyze", "RUN")
    assert code == 2 and err.startswith("loadtest: error: unrecognized arguments: --bogus (see loadtest --help)")
