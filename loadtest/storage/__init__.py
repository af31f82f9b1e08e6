"""Storage is a path: a run folder may be local or ``s3://bucket/prefix/``.

One filesystem layer (:mod:`pyarrow.fs`, already a dependency for Parquet)
reads and writes object storage. Credentials, region and endpoint come only from
the standard AWS environment variables and config files (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_DEFAULT_REGION``,
``AWS_ENDPOINT_URL``, ``~/.aws/…``, an IAM role), never from a scenario.

The pipeline itself only ever sees local folders: a remote run folder is written
locally and uploaded as it grows (:mod:`loadtest.storage.sync`, in a child
process so that no upload holds the load's event loop), and a remote one that is
read is downloaded first (:mod:`loadtest.storage.remote`).
"""
