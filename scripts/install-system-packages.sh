#!/usr/bin/env bash
# Installs the Debian/Ubuntu packages the stack runs on, only those missing.
#   scripts/install-system-packages.sh          servers and build headers (make demo)
#   scripts/install-system-packages.sh --test   also what the suite runs besides the stack:
#                                               chromium (the browser test), Debian's
#                                               docker-compose v1 (validates the compose
#                                               file offline; no Docker engine is needed)
#                                               and wrk (the benchmarks' smoke runs)
#   scripts/install-system-packages.sh --bench  also wrk (a load client that is not the
#                                               bottleneck: make bench-gate)
#   ... --list                                  print the packages of that mode, install nothing
#                                               (tests/test_tools.py reads it)
set -euo pipefail

mode="" list=""
for arg in "$@"; do
  case "$arg" in
    --test|--bench) mode="$arg" ;;
    --list) list=1 ;;
    *) echo "usage: $0 [--test|--bench] [--list]" >&2; exit 2 ;;
  esac
done

packages=(mariadb-server mariadb-client redis-server zookeeper nginx libmariadb-dev pkg-config
          prometheus prometheus-redis-exporter prometheus-mysqld-exporter prometheus-nginx-exporter
          prometheus-alertmanager   # routes the alerts to the pager (stack/templates/alertmanager.yml)
          mtail               # counts the purchases' answers in nginx's access log (monitoring/nginx.mtail)
          iproute2 nftables   # the test hosts of `make verdicts`: namespaces, veth, their links broken
          libfaketime         # ... and the clock jump of its clock-jump-redis (stack/clock.py)
          git                 # the measured figures name their commit (loadtest/measured.py)
          curl)               # the walks by hand of docs/getting-started.md (tests/test_getting_started.py)
[ "$mode" = "--test" ] && packages+=(chromium docker-compose wrk)
[ "$mode" = "--bench" ] && packages+=(wrk)
if [ -n "$list" ]; then
  printf '%s\n' "${packages[@]}"
  exit 0
fi

# A Python without venv/ensurepip or its headers (Debian's own python3) needs these
# to build the virtualenv and compile mysqlclient.
python3 - <<'PY' 2>/dev/null || packages+=(python3-venv python3-dev)
import ensurepip, os, sysconfig, venv
assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))
PY
command -v gcc >/dev/null || packages+=(build-essential)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: all present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# Debian's packages would start their servers on install where an init system
# runs; the stack starts its own on loopback ports, so say no to that.
$sudo env RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "system packages: installed ${missing[*]}"
