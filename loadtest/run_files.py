"""The names of a run folder's two JSON files, defined once for every reader and writer.

A leaf module (no imports): the path checks, the records, the summary, the gate, the
baseline and the storage sync all name these files, and each had its own copy.
"""

#: The run record (:mod:`loadtest.run_record`): how the run was made and how it ended.
RUN_JSON = "run.json"
#: The analysis' summary (:mod:`loadtest.report.summary`): the numbers CI reads.
SUMMARY_JSON = "summary.json"
