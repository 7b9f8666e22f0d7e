#!/bin/sh
# Docker's nginx: render nginx.conf.template the way the local launcher does
# (stack/servers.py), from the environment, then run nginx in the foreground.
#   UPSTREAMS   "app1:8000 app2:8000"   one server line each
#   NGINX_PORT  8080                    listened on, on every interface
#   RUN_DIR     /tmp/nginx              config, pid, temp paths
#   ERROR_LOG   /dev/stderr             nginx's error log (a container's: its standard error)
#   STATIC_ROOT /srv/static             collectstatic's output, served at /static/
#   DOCS_ROOT   /srv/docs               the documentation site (mkdocs build), served at /docs/
#   CACHE_ROOT  /tmp/nginx-cache        the product page's cache (nginx's workers write it)
#   SERVER_NAMES "localhost 127.0.0.1"  the hosts served; any other Host is answered 421
#   PURCHASE_RATE 10000                 purchases a second from one address before a 429
#   READ_RATE   10000                   every other request a second from one address
#   SHOW_UPSTREAM 1                     X-Upstream: which instance answered
#   TRUSTED_PROXIES "10.0.0.0/8"        a TLS terminator's addresses: the rates count its clients
#   ADMIN_ALLOW "127.0.0.1 ::1"         addresses (CIDR) served the admin site, /admin/; the rest: 403
#   STATUS_LISTEN 9113                  stub_status (for the nginx exporter) here; none unless set
#   RACE_LISTEN 8081                    the race runner's port: its rates count each buyer's
#                                       Authorization, not the runner's address; none unless set
#   EDGE_LOG    /var/log/edge/access.log each purchase's log line also into this file, for the
#                                       edge's exporter (mtail); none unless set
#   RENDER_ONLY 1                       write the config, print its path, don't start
set -eu
here=$(cd "$(dirname "$0")" && pwd)
run=${RUN_DIR:-/tmp/nginx}
mkdir -p "$run"

servers=""
for upstream in ${UPSTREAMS:?set UPSTREAMS to the app instances, e.g. "app1:8000 app2:8000"}; do
  servers="${servers}        server ${upstream};\n"
done

hosts=""
for host in ${SERVER_NAMES:-localhost 127.0.0.1}; do
  hosts="${hosts}        \"${host}\" \"\";\n"
done

real_ip=""
if [ -n "${TRUSTED_PROXIES:-}" ]; then
  for proxy in $TRUSTED_PROXIES; do
    real_ip="${real_ip}    set_real_ip_from ${proxy};\n"
  done
  real_ip="${real_ip}    real_ip_header X-Forwarded-For;\n    real_ip_recursive on;\n"
fi

admin_allow=""
for address in ${ADMIN_ALLOW:-127.0.0.1 ::1}; do
  admin_allow="${admin_allow}            allow ${address};\n"
done

upstream_header=""
if [ "${SHOW_UPSTREAM:-}" = "1" ]; then
  upstream_header='            add_header X-Upstream $upstream_addr always;'
fi

status_server=""
if [ -n "${STATUS_LISTEN:-}" ]; then
  status_server="    server {\n        listen ${STATUS_LISTEN};\n        location = /stub_status { stub_status; }\n"
  status_server="${status_server}        location / { return 404; }\n    }\n"
fi

race_listen=""
race_rate_client=""
if [ -n "${RACE_LISTEN:-}" ]; then
  race_listen="        listen ${RACE_LISTEN};"
  race_rate_client="        ${RACE_LISTEN##*:} \$http_authorization;"
fi

edge_log=""
if [ -n "${EDGE_LOG:-}" ]; then
  edge_log="    access_log ${EDGE_LOG} json if=\$purchase_line;"
fi

error_log=${ERROR_LOG:-/dev/stderr}

awk -v run="$run" -v error_log="$error_log" -v listen="${NGINX_PORT:-8080}" -v servers="$servers" -v static="${STATIC_ROOT:-/srv/static}" \
    -v docs="${DOCS_ROOT:-/srv/docs}" \
    -v cache="${CACHE_ROOT:-/tmp/nginx-cache}" -v hosts="$hosts" -v names="${SERVER_NAMES:-localhost 127.0.0.1}" \
    -v purchases="${PURCHASE_RATE:-10000}" -v reads="${READ_RATE:-10000}" -v upstream_header="$upstream_header" \
    -v real_ip="$real_ip" -v status_server="$status_server" -v admin_allow="$admin_allow" \
    -v race_listen="$race_listen" -v race_rate_client="$race_rate_client" -v edge_log="$edge_log" '
  /@\{race_listen\}/ { print race_listen; next }
  /@\{race_rate_client\}/ { print race_rate_client; next }
  /@\{edge_log\}/ { print edge_log; next }
  /@\{real_ip\}/ { printf "%s", real_ip; next }
  /@\{admin_allow\}/ { printf "%s", admin_allow; next }
  /@\{status_server\}/ { printf "%s", status_server; next }
  /@\{upstream_servers\}/ { printf "%s", servers; next }
  /@\{upstream_header\}/ { print upstream_header; next }
  /@\{known_hosts\}/ { printf "%s", hosts; next }
  { gsub(/@\{error_log\}/, error_log); gsub(/@\{run\}/, run); gsub(/@\{listen\}/, listen); gsub(/@\{static_root\}/, static); gsub(/@\{docs_root\}/, docs); gsub(/@\{cache_root\}/, cache)
    gsub(/@\{server_names\}/, names); gsub(/@\{purchase_rate\}/, purchases); gsub(/@\{read_rate\}/, reads)
    gsub(/@@/, "@"); print }
' "$here/nginx.conf.template" > "$run/nginx.conf"

if [ "${RENDER_ONLY:-}" = "1" ]; then
  echo "$run/nginx.conf"
  exit 0
fi
exec nginx -c "$run/nginx.conf" -p "$run" -e "$error_log"
