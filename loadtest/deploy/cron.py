"""The CronJob's ``--schedule``, checked as Kubernetes will check it, before any YAML is printed.

A CronJob's schedule is parsed by the controller with robfig/cron's standard parser: five
fields (minute, hour, day of month, month, day of week), each ``*`` (or ``?`` in the two day
fields), a value, a range ``a-b``, either with a step ``/n``, or a comma list of them; months and
weekdays may be named (``jan``, ``mon-fri``), and the macros ``@daily`` and friends stand for a
whole line. ``99 3 * * *`` passed a five-words check and gave a manifest that ``kubectl apply``
refuses (or, worse, that the night's gate never runs on), so each field is checked against its
range here. The day of week is 0-6: unlike Vixie cron, that parser refuses ``7`` for Sunday.
"""

from __future__ import annotations

#: The macros a CronJob accepts for a whole line (``@every`` is robfig's too, but not a nightly's).
MACROS = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")

_MONTHS = {name: i + 1 for i, name in enumerate(("jan", "feb", "mar", "apr", "may", "jun",
                                                 "jul", "aug", "sep", "oct", "nov", "dec"))}
_DAYS = {name: i for i, name in enumerate(("sun", "mon", "tue", "wed", "thu", "fri", "sat"))}

#: Each field: its name, its lowest and highest value, the names it takes, and whether ``?`` means ``*``.
_FIELDS: tuple[tuple[str, int, int, dict[str, int], bool], ...] = (
    ("minute", 0, 59, {}, False),
    ("hour", 0, 23, {}, False),
    ("day of month", 1, 31, {}, True),
    ("month", 1, 12, _MONTHS, False),
    ("day of week", 0, 6, _DAYS, True),
)


def schedule_problem(text: str) -> str | None:
    """What is wrong with a cron line, naming the field (``minute 99 is not in 0-59``), or None."""
    line = text.strip()
    if line.startswith("@"):
        if line in MACROS:  # as robfig/cron matches them: case and all
            return None
        return f"unknown macro {line!r}; expected five cron fields or one of {', '.join(map(repr, MACROS))}"
    fields = line.split()
    if len(fields) != 5:
        return (f"expected a cron line of five fields (minute hour day-of-month month day-of-week), e.g. '17 3 * * *', "
                f"or a macro such as '@daily'; got {len(fields)} field{'s' if len(fields) != 1 else ''}")
    for field, (name, low, high, names, question) in zip(fields, _FIELDS):
        for item in field.split(","):
            problem = _item_problem(item.lower(), low, high, names, question)
            if problem:
                return f"the {name} field {field!r}: {problem}"
    return None


def _item_problem(item: str, low: int, high: int, names: dict[str, int], question: bool) -> str | None:
    """One list item: ``*``, ``v``, ``a-b``, each with an optional ``/step``."""
    span = f"{low}-{high}" + (f" or {_name_span(names)}" if names else "")
    base, slash, step = item.partition("/")
    if slash:
        if not step.isdigit() or int(step) == 0:
            return f"the step in {item!r} must be a whole number of 1 or more"
    if base == "*" or (question and base == "?"):
        return None
    start, dash, end = base.partition("-")
    values = []
    for part in (start, end) if dash else (start,):
        value = _value(part, names)
        if value is None:
            return f"{part!r} is not a number in {span}" if part else f"{item!r} is not a value, a range or '*' (an empty list item?)"
        if not low <= value <= high:
            hint = " (Kubernetes takes 0 for Sunday, not 7)" if names is _DAYS and value == 7 else ""
            return f"{value} is not in {span}{hint}"
        values.append(value)
    if dash and values[0] > values[1]:
        return f"the range {base!r} runs backwards"
    return None


def _value(part: str, names: dict[str, int]) -> int | None:
    if part.isdigit():
        return int(part)
    return names.get(part)


def _name_span(names: dict[str, int]) -> str:
    ordered = sorted(names, key=names.__getitem__)
    return f"{ordered[0]}-{ordered[-1]}"
