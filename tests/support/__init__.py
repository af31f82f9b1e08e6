"""What the tests (and a few benchmarks) share; imported as ``support`` (pytest's ``pythonpath``).

``procs``            free ports, stopping and reaping child processes
``runkit``           writing scenarios, running ``loadtest`` as a child, reading its summary
``browser``          the system's headless Chromium over the DevTools protocol
``s3server``         a real S3-compatible server (moto's) on 127.0.0.1
``pathcase_driver``  runs the path-mistake matrix in one child process
``probe``            a raw-socket HTTP/SSE client that stamps every read (checks the mock's timing)
``reconcile``        a run's records against the mock's arrival log, kind by kind (the fault matrix)
``synthetic``        run folders with known answers for the analysis (tests, bench_analyzer)
``gate_runs``        the regression gate's synthetic runs (the ``pair`` fixture) and ``loadtest`` in-process
``realserver/``      llama.cpp's llama-server: built once per machine, a tiny random-weight model
``wirezoo/``         recorded wire formats of other servers, replayed on 127.0.0.1

Test code, not the product: none of it is installed with ``loadtest``.
"""
