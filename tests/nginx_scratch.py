"""A throwaway nginx for the tests of its config: the template rendered as Docker's
nginx renders it (``nginx/render.sh``), run as this process's child and stopped by
its PID."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests

from stack.config import ROOT
from stack.scratch import free_port


def rendered(tmp_path: Path, port: int, **env: str) -> Path:
    """Docker's rendering of the template (``nginx/render.sh``) listening on ``port``,
    with ``env`` (its variables), its instances nowhere: a request nginx lets through
    is 502."""
    result = subprocess.run(["sh", str(ROOT / "nginx/render.sh")], capture_output=True, text=True,
                            env={**os.environ, "RENDER_ONLY": "1", "RUN_DIR": str(tmp_path),
                                 "ERROR_LOG": str(tmp_path / "error.log"),
                                 "CACHE_ROOT": str(tmp_path / "cache"),
                                 "UPSTREAMS": f"127.0.0.1:{free_port()}", "NGINX_PORT": f"127.0.0.1:{port}",
                                 **env})
    assert result.returncode == 0, result.stderr
    return Path(result.stdout.strip())



@contextmanager
def running_nginx(conf: Path, prefix: Path, port: int) -> Iterator[None]:
    binary = shutil.which("nginx", path=os.environ["PATH"] + ":/usr/sbin")
    log = prefix / "error.log"
    server = subprocess.Popen([binary, "-c", str(conf), "-p", str(prefix), "-e", str(log)],
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                requests.get(f"http://127.0.0.1:{port}/", headers={"Host": "localhost"}, timeout=1)
                break
            except requests.ConnectionError:
                assert server.poll() is None, log.read_text() if log.exists() else "nginx exited"
                assert time.monotonic() < deadline, "nginx did not listen"
                time.sleep(0.05)
        yield
    finally:
        server.terminate()
        server.wait(timeout=10)
