"""The one compiled part: the client's per-read scanner (loadtest/client/_scanner.c).

Everything else is in pyproject.toml. ``optional=True``: on a machine without a C
compiler or Python's headers the install still succeeds and the client uses its
pure-Python path, which gives the same records (loadtest/client/scanner.py).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "loadtest.client._scanner",
            sources=["loadtest/client/_scanner.c"],
            optional=True,
        )
    ]
)
