"""A throw-away TLS certificate for ``loadtest mock --tls-cert/--tls-key`` on 127.0.0.1.

Made with the ``openssl`` command (on every machine this project runs on), so
tests and benchmarks can serve HTTPS without any file checked in.
"""

from __future__ import annotations

import subprocess
from pathlib import Path


def self_signed_cert(folder: Path) -> tuple[Path, Path]:
    """Write ``cert.pem`` and ``key.pem`` for 127.0.0.1 and localhost into ``folder``; return both paths."""
    cert, key = Path(folder) / "cert.pem", Path(folder) / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=60,
    )
    return cert, key
