#!/bin/bash
# The fixed cost of serve --http (BENCHMARKS.md "The dashboard, metrics and HTTP API"): the
# CPU time 3 idle `didnmf serve` processes on loopback spend in SECONDS, without --http and
# with it (each node's view refreshing every 500 ms, every node's /metrics scraped every
# second), alternately, REPS times each. Usage: bench/http_idle.sh [REPS] [SECONDS]   (from
# the repository's root; needs curl and ports 18301-18303 free)
set -eu
REPS=${1:-2}
SECS=${2:-30}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
B=$W/didnmf
go build -o "$B" ./cmd/didnmf
export DIDNMF_SECRET_FILE=$W/secret
head -c 32 /dev/urandom | base64 >"$W/secret"
chmod 600 "$W/secret"
ticks() { # CPU ticks (1/100 s) of the processes given
	local sum=0 p
	for p in "$@"; do sum=$((sum + $(awk '{print $14+$15}' "/proc/$p/stat"))); done
	echo $sum
}
for rep in $(seq "$REPS"); do
	for mode in plain http; do
		pids=() join=""
		for i in 1 2 3; do
			args=(serve --bind 127.0.0.1:0 --name "idle-$i" --data-dir "$W/$mode-$rep-$i" --log-format json)
			[ -n "$join" ] && args+=(--join "$join")
			[ $mode = http ] && args+=(--http "127.0.0.1:$((18300 + i))")
			"$B" "${args[@]}" >"$W/out-$i" 2>"$W/log-$i" &
			pids+=($!)
			sleep 2
			[ -z "$join" ] && join=$(grep -o '"gossip":"[^"]*"' "$W/log-1" | head -1 | cut -d'"' -f4)
		done
		sleep 3
		tok=$("$B" dashboard --token) # the operator token, from the secret
		t0=$(ticks "${pids[@]}")
		end=$((SECONDS + SECS))
		while [ $SECONDS -lt $end ]; do
			if [ $mode = http ]; then
				for i in 1 2 3; do curl -sf -H "Authorization: Bearer $tok" "http://127.0.0.1:$((18300 + i))/metrics" >/dev/null; done
			fi
			sleep 1
		done
		t1=$(ticks "${pids[@]}")
		echo "{\"mode\": \"$mode\", \"rep\": $rep, \"seconds\": $SECS, \"cpu_seconds_3_nodes\": $(awk "BEGIN{print ($t1-$t0)/100}")}"
		kill "${pids[@]}"
		wait "${pids[@]}" 2>/dev/null || true
	done
done
