"""The stack's directories outside its checkout: unguessable, recorded, its own; its
secrets, made once."""

import os
import stat
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from stack.config import StackConfig
from stack.control import clean


@pytest.fixture
def config(tmp_path, monkeypatch):
    monkeypatch.setenv("RUN_DIR", str(tmp_path / "run"))
    return StackConfig.from_env()


def test_each_outside_directory_is_made_once_under_a_name_nobody_can_guess(config):
    try:
        static, docs, cache = config.static_root, config.docs_root, config.nginx_cache_root
        assert StackConfig.from_env().static_root == static  # another process reads the same record
        assert config.docs_root == docs
        for path in (static, docs, cache.parent):
            assert path.parent == Path(tempfile.gettempdir())
            assert path.name.startswith("flashsale-") and not path.name.endswith(f"-{config.nginx_port}")
            info = path.lstat()
            assert stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid()
            assert stat.S_IMODE(info.st_mode) == 0o755  # nginx's workers read it, nobody else writes
        assert len({static, docs, cache.parent}) == 3
        metrics = config.metrics_root
        assert stat.S_IMODE(metrics.lstat().st_mode) == 0o700 or metrics.is_relative_to(config.run_dir)
    finally:
        clean(config)


def test_a_record_that_points_at_something_not_ours_is_made_again(config, tmp_path):
    try:
        first = config.static_root
        first.rmdir()
        # Someone else's link where ours was (the record's path): never used.
        target = tmp_path / "elsewhere"
        target.mkdir()
        first.symlink_to(target)
        try:
            again = config.static_root
            assert again != first and not again.is_symlink()
        finally:
            first.unlink()
    finally:
        clean(config)


def test_clean_removes_the_run_directory_and_every_outside_directory(config):
    made = [config.static_root, config.docs_root, config.nginx_cache_root.parent]
    (made[0] / "staticfiles.json").write_text("{}")
    clean(config)
    assert not any(path.exists() for path in made)
    assert not config.run_dir.exists()


def test_a_secret_made_by_many_at_once_is_one_and_only_its_owner_reads_it(config, monkeypatch):
    # The suite's parts start together on a fresh run directory, and each asks for
    # the admin token: one token, whoever made it, or the apps refuse the tests' own.
    monkeypatch.delenv("FLASHSALE_ADMIN_TOKEN", raising=False)
    start = threading.Barrier(8)

    def new() -> str:
        time.sleep(0.05)  # every caller has found no file before the first writes one
        return f"token-{threading.get_ident()}"

    def ask(_) -> str:
        start.wait()
        return config._secret("FLASHSALE_ADMIN_TOKEN", config.admin_token_file, new)

    with ThreadPoolExecutor(8) as pool:
        told = set(pool.map(ask, range(8)))
    assert told == {config.admin_token()} and len(told) == 1
    assert stat.S_IMODE(config.admin_token_file.stat().st_mode) == 0o600
    assert [p.name for p in config.run_dir.iterdir()] == ["admin-token"]


def test_a_request_knob_restarts_the_apps_alone_and_a_strategy_the_expirer_too(config):
    """What supervisord restarts follows each program's environment: a knob only the
    requests read leaves the processes beside the apps running."""
    try:
        knobs = config.replace(section_delay_ms=5.0, server="granian", buyer_auth=not config.buyer_auth,
                               fast_path=not config.fast_path, gate_pipeline=not config.gate_pipeline,
                               sign_up_challenge_bits=config.sign_up_challenge_bits + 12)
        assert knobs.app_environment("app1") != config.app_environment("app1")
        assert knobs.expirer_environment() == config.expirer_environment()
        assert knobs.persister_environment("persist1") == config.persister_environment("persist1")
        other = config.replace(strategy="setnx" if config.strategy != "setnx" else "atomic")
        assert other.expirer_environment() != config.expirer_environment()
        assert other.persister_environment("persist1") == config.persister_environment("persist1")
    finally:
        clean(config)


def test_the_suites_own_variables_reach_no_process_of_the_stack(config, monkeypatch):
    """A pytest part of ``make test`` carries its worker, pool and output files in
    ``FLASHSALE_TEST_*``: a stack it changes keeps the environment it was started with
    (else every process beside the apps restarts), while another ``FLASHSALE_`` variable
    still reaches the apps."""
    try:
        before = config.persister_environment("persist1"), config.expirer_environment()
        monkeypatch.setenv("FLASHSALE_TEST_WORKER", "1")
        monkeypatch.setenv("FLASHSALE_TEST_POOL", "/tmp/pool")
        monkeypatch.setenv("FLASHSALE_LOG_SQL", "true")
        app = config.app_environment("app1")
        assert not [name for name in app if name.startswith("FLASHSALE_TEST_")]
        assert app["FLASHSALE_LOG_SQL"] == "true"
        monkeypatch.delenv("FLASHSALE_LOG_SQL")
        assert (config.persister_environment("persist1"), config.expirer_environment()) == before
    finally:
        clean(config)
