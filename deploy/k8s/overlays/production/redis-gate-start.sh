#!/bin/sh
# A node of the gate's Redis Cluster, started again. nodes.conf names every node of
# the cluster by the address it had; after all the pods restarted, each has a new one,
# and a node that reaches none of its peers at the old addresses never rejoins. Each
# node announces its hostname (redis-gate-N.redis-gate-nodes, stable across restarts),
# which nodes.conf keeps beside the address: each hostname is resolved again and the
# address written anew (this node's own: POD_IP), then redis-server runs with the
# arguments given. A peer not resolved within RESOLVE_SECONDS keeps its old address.
set -eu
conf="${NODES_CONF:-/data/nodes.conf}"
wait_until=$(( $(date +%s) + ${RESOLVE_SECONDS:-120} ))

resolved() {
    while :; do
        ip=$(getent hosts "$1" | awk 'NR == 1 {print $1}') || ip=""
        if [ -n "$ip" ] || [ "$(date +%s)" -ge "$wait_until" ]; then
            echo "$ip"
            return
        fi
        sleep 1
    done
}

if [ -s "$conf" ]; then
    : > "$conf.new"
    while read -r id address rest; do
        if [ "$id" != vars ]; then
            ports=${address%%,*}      # ip:port@bus
            ports=${ports#*:}         # port@bus
            extra=${address#*,}       # hostname[,aux=value...]
            [ "$extra" = "$address" ] && extra=""
            hostname=${extra%%,*}
            case "$rest" in
                myself*) ip="$POD_IP" ;;
                *) ip=""; [ -z "$hostname" ] || ip=$(resolved "$hostname") ;;
            esac
            if [ -n "$ip" ]; then
                address="$ip:$ports${extra:+,$extra}"
            else
                echo "redis-gate-start: ${hostname:-$id} not resolved, its address kept" >&2
            fi
        fi
        echo "$id $address $rest" >> "$conf.new"
    done < "$conf"
    mv "$conf.new" "$conf"
fi
exec "$@"
