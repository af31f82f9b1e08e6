"""The names of a run folder's files, defined once for every reader and writer.

A leaf module (no imports): the path checks, the records, the summary, the gate, the
baseline and the storage sync all name these files, and each had its own copy.
"""

#: The run record (:mod:`loadtest.run_record`): how the run was made and how it ended.
RUN_JSON = "run.json"
#: The analysis' summary (:mod:`loadtest.report.summary`): the numbers CI reads.
SUMMARY_JSON = "summary.json"
#: The raw records, one row per request (:mod:`loadtest.records`); a run still being written keeps parts.
REQUESTS_PARQUET = "requests.parquet"
PARTS_DIR = "requests.parts"
#: The self-contained report (:mod:`loadtest.report.html`; ``loadtest profile`` writes one too).
REPORT_HTML = "report.html"
#: The regression gate's verdict (``compare --json``; ``run --baseline`` writes it into the run folder,
#: or with ``--repeat`` into the folder that holds the runs).
COMPARE_JSON = "compare.json"
