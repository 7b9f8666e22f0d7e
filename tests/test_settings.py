import json
import os
import re
import secrets
import subprocess

from common.strategies import STRATEGIES
from stack.suite import SUITE_ENVIRONMENT

from .forked import python


def start_django(**env) -> subprocess.CompletedProcess:
    return python(["-c", "import django; django.setup()"],
                  env={**os.environ, "DJANGO_SETTINGS_MODULE": "flashsale.settings.base", **env})


def test_unknown_strategy_fails_at_start_up_naming_the_choices():
    result = start_django(FLASHSALE_STRATEGY="bogus")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert f"unknown strategy 'bogus'; choose one of: {', '.join(STRATEGIES)}" in result.stderr
    assert "none, local" in result.stderr


def test_known_strategy_starts():
    assert start_django(FLASHSALE_STRATEGY="local").returncode == 0


def test_every_strategy_names_a_configured_lock():
    from django.conf import settings


    locked = {spec.name: spec.lock for spec in STRATEGIES.values() if not spec.gated}
    assert {name: lock for name, lock in locked.items() if lock not in settings.LOCKING} == {}
    # The lockless ones share the null lock: one alias, not one per strategy.
    assert {name for name, lock in locked.items() if lock == "null"} == {"none", "optimistic", "atomic"}


def manage(*args: str, **env) -> subprocess.CompletedProcess:
    # Not the suite's own choices either (stack.suite.SUITE_ENVIRONMENT): production refuses them.
    clean = {k: v for k, v in os.environ.items()
             if k not in ("DJANGO_SECRET_KEY", "DJANGO_SETTINGS_MODULE", *SUITE_ENVIRONMENT)}
    return python(["manage.py", *args],
                  env={**clean, "DJANGO_SETTINGS_MODULE": "flashsale.settings.production",
                       "FLASHSALE_PER_USER_LIMIT": "2", **env})


def own_secrets() -> dict[str, str]:
    return {"FLASHSALE_ADMIN_TOKEN": secrets.token_urlsafe(32),
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DATABASE_URL": f"mysql://flashsale:{secrets.token_hex(16)}@db:3306/flashsale",
            "REDIS_PASSWORD": secrets.token_hex(16),
            "ZOOKEEPER_AUTH": f"flashsale:{secrets.token_hex(16)}"}


def test_the_production_settings_pass_the_deploy_check_but_for_the_redirect_left_to_tls():
    result = manage("check", "--deploy", "--fail-level", "ERROR", **own_secrets())
    assert result.returncode == 0, result.stderr
    warnings = re.findall(r"\(([\w.]+\.[WE]\d+)\)", result.stdout + result.stderr)
    # W008 (no HTTP→HTTPS redirect): the TLS terminator's job, as the module says.
    assert warnings == ["security.W008"], result.stdout + result.stderr


def test_the_production_settings_refuse_to_start_without_a_secret_key():
    result = manage("check", **{k: v for k, v in own_secrets().items() if k != "DJANGO_SECRET_KEY"})
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


def test_the_production_settings_refuse_weak_credentials_on_any_bind():
    """The bind address says loopback (the default): production's guard runs all the same."""
    weak = {"FLASHSALE_ADMIN_TOKEN": "s3cr3t", "DJANGO_SECRET_KEY": "x" * 31,
            "DATABASE_URL": "mysql://flashsale:flashsale@db:3306/flashsale"}
    for name, value in weak.items():
        result = manage("check", **{**own_secrets(), name: value})
        assert result.returncode != 0, name
        [line] = [line for line in result.stderr.splitlines() if "refusing to start" in line]
        named = name.replace("DATABASE_URL", "DB_PASSWORD")
        assert f"under the production settings (FLASHSALE_PROCESS=web) while {named} is " in line
    assert manage("check", **{**own_secrets(), "DJANGO_SECRET_KEY": "x" * 32}).returncode == 0


def test_the_production_settings_refuse_what_would_open_the_sale_to_anyone():
    opening = [("FLASHSALE_BUYER_AUTH", "false"), ("FLASHSALE_BUYER_TOKEN_KEY", "k" * 31),
               ("FLASHSALE_BUYER_TOKEN_KEY", "flashsale"), ("FLASHSALE_PER_USER_LIMIT", "0"),
               ("FLASHSALE_PER_USER_LIMIT", "-1"), ("FLASHSALE_QUICK_PASSWORD_HASHING", "true")]
    for name, value in opening:
        for command in (["check"], ["check", "--deploy"]):
            result = manage(*command, **{**own_secrets(), name: value})
            assert result.returncode != 0, (name, value)
            [line] = [line for line in result.stderr.splitlines() if "refusing to start" in line]
            assert f"under the production settings while {name} is " in line, line
    # Each, said on purpose: a key of 32 characters, a derived one, no cap meant.
    for meant in ({"FLASHSALE_BUYER_TOKEN_KEY": "k" * 32}, {"FLASHSALE_BUYER_TOKEN_KEY": ""},
                  {"FLASHSALE_PER_USER_LIMIT": "0", "FLASHSALE_PER_USER_LIMIT_OFF": "true"}):
        assert manage("check", **{**own_secrets(), **meant}).returncode == 0, meant
    # Two at once: one line names both.
    both = {"FLASHSALE_BUYER_AUTH": "false", "FLASHSALE_PER_USER_LIMIT": "0"}
    [line] = [line for line in manage("check", **own_secrets(), **both).stderr.splitlines()
              if "refusing to start" in line]
    assert "FLASHSALE_BUYER_AUTH is false" in line and "; FLASHSALE_PER_USER_LIMIT is not above 0" in line


def test_quick_hashing_keeps_new_passwords_as_md5_and_still_checks_the_pbkdf2_ones():
    code = ("from django.contrib.auth.hashers import check_password, identify_hasher, make_password; "
            "from django.contrib.auth.hashers import PBKDF2PasswordHasher; "
            # A stored PBKDF2 hash is checked at its own iterations: few, so the
            # check costs nothing, and checked all the same.
            "old = PBKDF2PasswordHasher().encode('a long passphrase', 'saltsaltsalt', iterations=1000); "
            "print(identify_hasher(make_password('a long passphrase')).algorithm, "
            "check_password('a long passphrase', old), check_password('another one', old))")
    said = {}
    for quick in ("false", "true"):
        env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", *SUITE_ENVIRONMENT)}
        result = python(["manage.py", "shell", "--no-imports", "-c", code],
                        env={**env, "DJANGO_SETTINGS_MODULE": "flashsale.settings.base",
                             "FLASHSALE_QUICK_PASSWORD_HASHING": quick})
        assert result.returncode == 0, result.stderr
        said[quick] = result.stdout.split()
    assert said == {"false": ["pbkdf2_sha256", "True", "False"], "true": ["md5", "True", "False"]}


def test_the_production_settings_refuse_a_redis_without_a_password_and_give_both_urls_one():
    given = own_secrets()
    for missing in ({"REDIS_PASSWORD": ""}, {"REDIS_PASSWORD": "flashsale"}):
        result = manage("check", **{**given, **missing})
        assert result.returncode != 0
        assert "while REDIS_PASSWORD is missing, well known or short" in result.stderr
    read = "from django.conf import settings as s; print(s.REDIS_URL, s.FLASHSALE_GATE_REDIS_URL)"
    result = manage("shell", "--no-imports", "-c", read, **given, REDIS_URL="redis://redis:6379/0",
                    FLASHSALE_GATE_REDIS_URL="redis://redis-gate:6379/0")
    assert result.stdout.split() == [f"redis://:{given['REDIS_PASSWORD']}@redis:6379/0",
                                     f"redis://:{given['REDIS_PASSWORD']}@redis-gate:6379/0"], result.stderr
    # A URL that names its own password keeps it.
    result = manage("shell", "--no-imports", "-c", read, **given, REDIS_URL="redis://:own@redis:6379/0")
    assert result.stdout.split()[0] == "redis://:own@redis:6379/0", result.stderr


def test_the_production_settings_refuse_zookeeper_without_credentials():
    for missing in ("", "flashsale", "flashsale:flashsale"):
        result = manage("check", **{**own_secrets(), "ZOOKEEPER_AUTH": missing})
        assert result.returncode != 0, missing
        assert "while ZOOKEEPER_AUTH is missing, well known or short" in result.stderr, missing


def test_the_production_settings_trust_two_proxies_the_terminator_and_nginx():
    read = "from django.conf import settings; print(settings.REST_FRAMEWORK['NUM_PROXIES'])"
    result = manage("shell", "--no-imports", "-c", read, **own_secrets())
    assert result.stdout.strip() == "2", result.stdout + result.stderr


def test_published_beyond_loopback_the_apps_refuse_well_known_credentials_in_one_line():
    result = start_django(FLASHSALE_PUBLIC_BIND="0.0.0.0", FLASHSALE_ADMIN_TOKEN="change-me",
                          DJANGO_SECRET_KEY="", DATABASE_URL="mysql://flashsale:flashsale@db:3306/flashsale")
    assert result.returncode != 0
    [line] = [line for line in result.stderr.splitlines() if "refusing to start" in line]
    assert ("published on 0.0.0.0 (beyond loopback) while FLASHSALE_ADMIN_TOKEN, DJANGO_SECRET_KEY, "
            "DB_PASSWORD are missing, well known or short") in line
    assert "secrets.token_urlsafe" in line


def test_published_beyond_loopback_a_short_token_is_refused_too():
    short = {**own_secrets(), "FLASHSALE_ADMIN_TOKEN": "s3cr3t"}
    result = start_django(FLASHSALE_PUBLIC_BIND="0.0.0.0", **short)
    assert result.returncode != 0
    assert "while FLASHSALE_ADMIN_TOKEN is missing, well known or short" in result.stderr


def test_published_beyond_loopback_the_compose_files_webhook_secret_is_refused():
    result = start_django(FLASHSALE_PUBLIC_BIND="0.0.0.0", FLASHSALE_PAYMENTS_WEBHOOK_SECRET="whsec_compose",
                          **own_secrets())
    assert result.returncode != 0
    assert "while FLASHSALE_PAYMENTS_WEBHOOK_SECRET is well known" in result.stderr
    assert start_django(FLASHSALE_PUBLIC_BIND="127.0.0.1", FLASHSALE_PAYMENTS_WEBHOOK_SECRET="whsec_compose",
                        ).returncode == 0


def test_published_beyond_loopback_the_apps_start_with_secrets_of_their_own():
    assert start_django(FLASHSALE_PUBLIC_BIND="0.0.0.0", **own_secrets()).returncode == 0
    assert start_django(FLASHSALE_PUBLIC_BIND="127.0.0.1").returncode == 0  # loopback: defaults are fine



def settings_value(name: str, **env) -> str:
    """The setting as the base settings read it from this environment, without the
    renamed settings' new names unless ``env`` gives them."""
    inherited = {k: v for k, v in os.environ.items()
                 if k not in {"FLASHSALE_SECTION_DELAY_MS", "FLASHSALE_PURCHASE_SHORTCUT"}}
    script = f"import django; django.setup(); from django.conf import settings; print(settings.{name})"
    result = python(["-c", script],
                    env={**inherited, "DJANGO_SETTINGS_MODULE": "flashsale.settings.base", **env})
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_renamed_settings_still_read_their_old_names():
    assert settings_value("FLASHSALE_SECTION_DELAY_MS", FLASHSALE_RACE_DELAY_MS="7") == "7.0"
    assert settings_value("FLASHSALE_PURCHASE_SHORTCUT", FLASHSALE_PURCHASE_FRONT="false") == "False"
    # The new name wins over the old one.
    assert settings_value("FLASHSALE_SECTION_DELAY_MS", FLASHSALE_RACE_DELAY_MS="7",
                          FLASHSALE_SECTION_DELAY_MS="3") == "3.0"


def test_redis_sentinels_send_the_cache_and_the_redis_locks_to_the_master_they_name():
    script = ("import django, json; django.setup(); from django.conf import settings as s; "
              "print(json.dumps([s.CACHES['default']['LOCATION'], s.CACHES['default']['OPTIONS'], "
              "{a: o.get('OPTIONS', {}).get('sentinels') for a, o in s.LOCKING.items()}]))")
    result = python(["-c", script], env={**os.environ, "DJANGO_SETTINGS_MODULE": "flashsale.settings.base",
                                         "REDIS_SENTINELS": "10.9.0.2:26379,10.9.0.3:26380",
                                         "REDIS_URL": "redis://127.0.0.1:6390/3"})
    assert result.returncode == 0, result.stderr
    location, options, sentinels = json.loads(result.stdout)
    assert location == "redis://flashsale/3"  # the service, and REDIS_URL's database
    assert options["CONNECTION_FACTORY"] == "django_redis.pool.SentinelConnectionFactory"
    assert options["SENTINELS"] == [["10.9.0.2", 26379], ["10.9.0.3", 26380]]
    redis_locks = {"setnx", "redisson", "redisson-fair"}
    assert {a for a, s in sentinels.items() if s} == redis_locks
    assert all(sentinels[a] == [["10.9.0.2", 26379], ["10.9.0.3", 26380]] for a in redis_locks)
