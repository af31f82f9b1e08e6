"""Hold a run's records against the mock's own account of the same requests.

A load tester is trusted to count every request while the server misbehaves:
each refusal, cut stream, corrupt chunk or hang must show up as exactly one
record of the matching kind, none lost, none invented. The mock counts how
every request ended (``loadtest_mock_outcomes_total``) and, with
``--arrival-log``, every request that reached it even across a kill -9. This
module matches the two, outcome by outcome.

Which client record kind answers which server outcome:

================  ==========================================
server outcome    client ``error_kind``
================  ==========================================
ok                none (``ok`` is true)
http_500          ``http_5xx``
http_429          ``rate_limited``
http_4xx          ``http_4xx``
malformed         ``malformed``
dropped           ``disconnect``
shutdown          ``disconnect`` or ``http_5xx`` (a 503)
client_left       ``timeout``
(none)            ``connect``: the request never reached a server
================  ==========================================

A ``disconnect`` without an HTTP status (the connection was made, then closed before any
response byte) may or may not have reached the server: a killed server's kernel accepted the
connection, and its bytes may never have been read. It is counted as ``unanswered`` and is
ambiguous, as ``cancelled`` is.

The preflight's tries reach the server too and are not records; run.json
lists them, and they are counted here with the records, as is the one request a
run that ended on unanswered requests sends after its load (run.json's ``after_load``). A ``cancelled``
record is the one honest ambiguity: the harness may cut a request before or
after its bytes reached the server, so those are allowed either way and
reported as such: a cancelled record may stand for any outcome, most
often ``client_left``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Mapping

import pandas as pd

#: Server outcome -> the client record kinds that answer it.
ANSWERS: dict[str, tuple[str, ...]] = {
    "ok": ("ok",),
    "http_500": ("http_5xx",),
    "http_429": ("rate_limited",),
    "http_4xx": ("http_4xx",),
    "malformed": ("malformed",),
    "dropped": ("disconnect",),
    "client_left": ("timeout",),
}

#: Client kinds whose request may or may not have reached the server.
AMBIGUOUS = ("cancelled", "unanswered")
#: Client kinds whose request certainly never reached a server.
UNSENT = ("connect",)


def client_kinds(records: pd.DataFrame, preflight_attempts: Iterable[Mapping] = ()) -> Counter[str]:
    """Records and preflight tries by kind (``"ok"`` for a success)."""
    kinds: Counter[str] = Counter()
    statuses = records["status"] if "status" in records else [200] * len(records)
    for ok, kind, status in zip(records["ok"], records["error_kind"], statuses):
        unanswered = kind == "disconnect" and not status  # closed before any response byte
        kinds["ok" if ok else "unanswered" if unanswered else str(kind)] += 1
    for attempt in preflight_attempts:
        kind = attempt.get("error_kind")
        kinds["ok" if not kind else "unanswered" if kind == "disconnect" and not attempt.get("status") else str(kind)] += 1
    return kinds


@dataclass
class Reconciliation:
    """The comparison of one run; :attr:`problems` is empty when every request is accounted for."""

    server_seen: int
    """Requests that reached the server (its arrival log, or the sum of its outcomes)."""
    client: Counter[str]
    """Records plus preflight tries, by kind."""
    server: Counter[str] | None
    """The server's outcome counts, or None when a kill -9 took them."""
    problems: list[str] = field(default_factory=list)

    @property
    def recorded(self) -> int:
        return sum(self.client.values())

    @property
    def reached(self) -> int:
        """Client requests that certainly reached a server."""
        return self.recorded - sum(self.client[k] for k in (*UNSENT, *AMBIGUOUS))

    @property
    def missing(self) -> int:
        """Requests the server saw that no record accounts for (must be 0)."""
        ambiguous = sum(self.client[k] for k in AMBIGUOUS)
        return max(0, self.server_seen - self.reached - ambiguous)

    @property
    def invented(self) -> int:
        """Records that claim to have reached the server beyond what it saw (must be 0)."""
        return max(0, self.reached - self.server_seen)


def reconcile(
    records: pd.DataFrame,
    *,
    preflight_attempts: Iterable[Mapping] = (),
    server_outcomes: Mapping[str, int] | None,
    server_arrivals: int | None = None,
    shutdown_as: str = "disconnect",
) -> Reconciliation:
    """Match records to the server's counts; see the module docstring for the rules.

    ``server_outcomes`` is None when the server was killed (its counters died
    with it); then only the totals are matched, against ``server_arrivals``.
    """
    client = client_kinds(records, preflight_attempts)
    server = Counter({k: int(v) for k, v in (server_outcomes or {}).items()})
    seen = server_arrivals if server_arrivals is not None else sum(server.values())
    result = Reconciliation(seen, client, server if server_outcomes is not None else None)
    if result.missing:
        result.problems.append(f"{result.missing} request(s) reached the server but have no record")
    if result.invented:
        result.problems.append(f"{result.invented} record(s) claim a response the server never sent")
    if server_outcomes is not None:
        result.problems += _outcome_mismatches(client, server, shutdown_as)
    return result


def _outcome_mismatches(client: Counter[str], server: Counter[str], shutdown_as: str) -> list[str]:
    """Kind by kind: never more records than the server's count; any shortfall covered by cancels.

    A request the harness cancelled may have ended any way on the server's side
    (most often ``client_left``; rarely ``ok`` when the server's last bytes were
    still unread), so cancelled records may fill any kind's shortfall, and
    nothing else may.
    """
    expected: Counter[str] = Counter()
    for outcome, n in server.items():
        kinds = ANSWERS.get(outcome, (shutdown_as,) if outcome == "shutdown" else ())
        if not kinds:
            return [f"unknown server outcome {outcome!r}"]
        expected[kinds[0]] += n
    problems = []
    shortfall: dict[str, int] = {}
    for kind in sorted(set(expected) | {k for k in client if k not in (*UNSENT, *AMBIGUOUS)}):
        want, got = expected[kind], client[kind]
        if got > want:
            problems.append(f"{kind}: {got} record(s) but the server counted {want}")
        elif got < want:
            shortfall[kind] = want - got
    cancelled = sum(client[k] for k in AMBIGUOUS)
    if sum(shortfall.values()) > cancelled:
        detail = ", ".join(f"{k} short by {n}" for k, n in shortfall.items())
        problems.append(f"{detail}: more than the {cancelled} cancelled record(s) can account for")
    return problems
