"""Baseline vs candidate, and runs over time: the nightly regression gate.

Reads run folders and nothing else (records, summaries and fingerprints in;
verdicts and pages out); never imports :mod:`loadtest.load`. One module per idea:

``fingerprint``  what must match for two runs to be comparable
``inputs``       a run folder or summary.json as one side of a comparison
``alike``        what makes two runs comparable (one load mode, one workload, two runs)
``level_keys``   levels matched and named by users, offered rate (req/s) or trace speedup (×)
``samples``      per-level samples grouped by request, from the analysis functions
``delta``        bootstrap replicates with requests resampled
``rules``        tolerances and ``--fail-on``
``capacity``     capacity brackets, and when a drop is certain
``engine``       the comparison itself, its verdicts and exit code
``noise``        run-to-run noise: each reference run's value of a check, and its spread
``joint``        the thresholds for all checks at once, from the reference runs' correlation
``counts``       a rate whose reference runs never went wrong: an exact count test
``groups``       several baselines and candidates, and the history, through the noise
``outputs``      compare.json, JUnit XML, Markdown, terminal text
``page``         compare.html (curves overlaid)
``history``      every run of a scenario over time, each judged against the ones before it
``history_page`` ``loadtest history``: its table, its page and the command
``gate``         the command-line glue shared by ``compare`` and ``run --baseline``
"""
