"""The run's failed requests grouped by what they said: one row per message, numbers aside. Pure.

Why: a server's error messages carry numbers (a context length, a request id, a retry time), so
grouping them exactly made ten context refusals of ten prompt lengths ten rows of one, and
thousands of messages with an id in each filled the report's table with one cause and hid any
other. Here a message's digits are read alike (``"… 4127 tokens …"`` and ``"… 4096 tokens …"`` are
one group), per kind, and each group is shown by its commonest message with how many distinct
ones it holds. The report's errors section and the terminal's ``errors:`` line both read it.
Vectorized: a run may hold millions of failures, each message its own string.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:
    import pandas as pd

#: The longest message quoted (a server may send a page of HTML as its error).
MESSAGE_CHARS = 300


@dataclass(frozen=True)
class MessageGroup:
    """Failures of one kind whose messages differ only in their numbers."""

    kind: str
    message: str  # the commonest message of the group, cut at MESSAGE_CHARS
    count: int
    messages: int  # distinct messages in the group (1: all alike)


def kinds_text(kinds: Mapping[str, int], top: int | None = 3) -> str:
    """``rate_limited 10, timeout 2, …``: the kinds of failure, commonest first, ``top`` of them (None: all).

    The one wording of a count of failures by kind: the capacity's sentence, why it stops there, the
    live lines and the warm-up's warning read it."""
    ranked = sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))
    shown = ranked if top is None else ranked[:top]
    return ", ".join(f"{kind} {n}" for kind, n in shown) + (", …" if len(shown) < len(ranked) else "")


def message_groups(frame: pd.DataFrame, top: int = 15) -> list[MessageGroup]:
    """The ``top`` commonest groups of the failed requests in ``frame`` (the analysis' ``failed`` rows), most first."""
    totals = _totals(frame)
    if totals is None:
        return []
    return [MessageGroup(str(kind), str(row["msg"])[:MESSAGE_CHARS], int(row["sum"]), int(row["size"]))
            for (kind, _), row in totals.head(top).iterrows()]


def _totals(frame: pd.DataFrame) -> pd.DataFrame | None:
    """Every group's count (``sum``), distinct messages (``size``) and commonest message (``msg``), most first."""
    # pandas here, not at import: the preflight and the live lines read kinds_text, and start-up counts there
    import pandas as pd

    if not len(frame) or "failed" not in frame or "error" not in frame:
        return None
    failed = frame.loc[frame["failed"].astype(bool)]
    if not len(failed):
        return None
    kinds = failed["error_kind"].astype(object).where(failed["error_kind"].notna(), "unknown").astype(str)
    text = failed["error"].astype(object).where(failed["error"].notna(), "").astype(str)
    # numbers, and hexadecimal ids with a digit in them (a request id, 12a068907b5e), read alike
    shape = text.str.replace(r"[0-9a-fA-F]*\d[0-9a-fA-F]*", "#", regex=True)
    df = pd.DataFrame({"kind": kinds.to_numpy(), "shape": shape.to_numpy(), "msg": text.to_numpy()})
    per_msg = (df.groupby(["kind", "shape", "msg"], sort=False).size().reset_index(name="n")
               .sort_values(["n", "msg"], ascending=[False, True], kind="stable"))
    commonest = per_msg.drop_duplicates(["kind", "shape"]).set_index(["kind", "shape"])["msg"]
    totals = per_msg.groupby(["kind", "shape"], sort=False)["n"].agg(["sum", "size"])
    return totals.assign(msg=commonest).sort_values("sum", ascending=False, kind="stable")


def errors_line(frame: pd.DataFrame, requests: int) -> str | None:
    """The terminal's ``errors:`` line: how many measured requests failed and the commonest message; None without failures.

    ``requests``: the levels' measured requests (the table's ``reqs``), whose failures are the table's ``errors``."""
    if len(frame) and "measured" in frame:
        frame = frame.loc[frame["measured"].astype(bool)]
    totals = _totals(frame)
    if totals is None:
        return None
    (kind, _), row = next(totals.iterrows())
    first = MessageGroup(str(kind), str(row["msg"])[:MESSAGE_CHARS], int(row["sum"]), int(row["size"]))
    others = len(totals) - 1  # every other group, not only those the report's table shows
    failed = int(frame["failed"].astype(bool).sum())
    alike = f", {first.messages} messages alike but for their numbers" if first.messages > 1 else ""
    more = f"; {others} other kind{'s' if others > 1 else ''} of message in the report" if others else ""
    said = f'"{first.message}"' if first.message else "(no message)"
    return (f"errors: {failed} of {requests} measured requests failed; the commonest, {first.count} times "
            f"({first.kind}{alike}): {said}{more}")
