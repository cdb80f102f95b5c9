#!/bin/sh
# The didnmf image's entry point: `didnmf serve` on the container's own address, with the
# image's ports, data directory and data root (deploy/README.md, "Docker").
#
#   docker run IMAGE [SERVE FLAGS...]   serve; later flags override these (--join, --memory, ...)
#   docker run IMAGE COMMAND [ARGS...]  any other didnmf command (status, jobs, --version, ...)
#
# serve needs the IP address the other nodes reach this one at (no wildcard): $DIDNMF_IP, else
# the address the container's host name resolves to (Docker and Kubernetes write it into
# /etc/hosts).
set -eu

case "${1:-}" in
-* | "") ;; # serve's flags, or none
*) exec didnmf "$@" ;;
esac
if [ "${1:-}" = --version ] || [ "${1:-}" = -version ]; then
	exec didnmf "$@"
fi

ip=${DIDNMF_IP:-}
if [ -z "$ip" ]; then
	# shellcheck disable=SC2046 # split getent's answer into words: the first is the address
	set -- $(getent hosts "$(cat /proc/sys/kernel/hostname)") -- "$@"
	ip=$1
	while [ "$1" != -- ]; do shift; done
	shift
fi
case $ip in
"" | --)
	echo "didnmf-entrypoint: cannot tell this container's IP address: set DIDNMF_IP" >&2
	exit 2
	;;
*:*) host="[$ip]" ;; # IPv6
*) host=$ip ;;
esac

exec didnmf serve \
	--bind "$host:7946" \
	--actor-port 7947 \
	--data-port 7948 \
	--http "$host:8265" \
	--data-dir /var/lib/didnmf/node \
	--data-root /data \
	--secret-file /var/lib/didnmf/cluster.secret \
	--log-format json \
	"$@"
