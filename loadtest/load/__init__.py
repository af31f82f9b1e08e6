"""The load stage: Locust used as a library drives the levels and records every request.

The front door is :func:`loadtest.load.orchestrate.run_load` (``loadtest run``
calls it between the preflight and the analysis). This package imports
nothing at import time: Locust patches the standard library for gevent, and
that must happen (``import locust``) before its modules are imported.
One module per idea:

``orchestrate``   the stage wired: sink, recorder, session, judge, live view; levels, refine, close
``modes``         load modes as types: closed loop (users), open loop (rates); chosen once
``session``       one Locust runner for a run; a batch of levels per call
``distributed``   Locust's master/worker mode and our messages between them
``workers``       the master session and the local worker processes it spawns
``shape``         the stepped and rate shapes: each level held until decided
``hold``          a level keeps its load until the requests it measured finish
``settle``        before a refine probe, wait until the server has worked off the last batch's queue
``judge``         the level judge (a child process, a thread if it fails) at every look
``levels``        the level in force (the clock users read) and a level's span in run.json
``user``          the Locust user: one stream of requests (closed loop, or an open-loop sender)
``open_loop``     arrivals released on their own schedule to whichever user is free
``arrivals``      open-loop send times, drawn in advance from a seeded process
``recorder``      finished requests tagged with their level, flushed to the sink
``batch``         the columnar record buffer and its wire encoding
``sink``          where flushed batches go on the process that owns the run folder
``sink_child``    the pipe to the record writer process; ``sink_frames``: what goes down it
``sink_worker``   the record writer process: decode, live figures, part files, off the timing process
``monitor``       the harness's own loop lag and CPU per level
``host``          the machine's load beside the client's own
``fdlimit``       enough file descriptors for the users
``stopping``      users that really stop, a Ctrl-C gevent's hub does not print; ``ticks``: the shape ticked ten times a second
``backoff``       the pause after a refused connection or a 429
``master_watch``  a hand-started worker stops when its master is gone
``progress``      running figures from each batch; ``live``: the live terminal view
``webui``         ``--web``: Locust's web UI extended to drive the run
"""
