#!/usr/bin/env bash
# The sweep at the scale of the people who ask (issue 34): a rank sweep over a large sparse
# count matrix with planted programs, on 3 local `didnmf serve` members, one of which is
# killed with SIGKILL mid-sweep; then checks that every run ended and prints one summary
# (wall time, runs, per-run seconds, peak RSS of each member and of the sweep's driver,
# CPU seconds, the load average, the bytes of spectra the driver held).
#
#   bench/sweep_scale.sh                                   # the issue's: 200,000 x 20,000, 2%, K=5..30 x 10
#   bench/sweep_scale.sh --ranks 5:30:5 --seeds 3          # a reduction
#   bench/sweep_scale.sh --rows 20000 --cols 2000 --ranks 5:20:5 --seeds 2 --kill-after 2
#   bench/sweep_scale.sh ... -- --max-iter 200             # flags after -- go to `didnmf sweep`
#   bench/sweep_scale.sh --stop-after 3600                 # a chunk: kill the sweep's driver after an hour
#   bench/sweep_scale.sh --run DIR                         # go on with DIR's sweep (--resume) to its end
#   bench/sweep_scale.sh --run DIR --consensus 15          # ... then cNMF's consensus of its K=15 runs
#
# Flags (defaults: the issue's):
#   --rows N (200000) --cols N (20000) --density D (0.02) --k K (15, planted)   the matrix
#   --ranks LIST (5:30) --seeds N (10) --shards N (3)                           the sweep
#   --work DIR (/tmp/didnmf-sweep-scale)   binaries, the matrix (kept: made once), nodes, output
#   --kill-after N (3)      kill the third member with SIGKILL once N runs have ended
#   --restart yes|no (yes)  start it again (same name and data dir) --restart-after seconds later
#   --restart-after S (20)
#   --port P (27950)        members gossip on 127.0.0.1:P+1..P+3
#   --run DIR               go on with the sweep of an earlier run directory DIR (its members' data,
#                           secret and --out): `didnmf sweep --resume` runs only the runs its journal
#                           (DIR/sweep/runs) lacks; give the same matrix and sweep flags as before
#   --consensus K           once the sweep has ended, run didnmf consensus of its rank K on the same
#                           members (the usages refit by the distributed transform) and print its
#                           wall time, CPU and peak RSS (the members' peaks reset before it)
#   --stop-after S          kill the sweep's driver with SIGKILL after S seconds (a real driver loss:
#                           a sweep too long for one sitting goes on later with --run); each
#                           chunk's wall time, CPU and peaks go to DIR/chunks.tsv, and the summary at
#                           the sweep's end adds them up
# Run it from anywhere inside the repository (it builds ./cmd/didnmf and ./bench/sweepscale);
# run it under `nice` on a shared machine: the members and the driver inherit it.
#
# The sweep cross-validates with the sweep's default held-out set (10%): DID keeps only the
# stored held-out entries (kernels' didheld.go), so the held-out zeros of a sparse matrix cost
# no memory. Give `-- --test-fraction 0` to choose by stability alone, as cNMF does.
set -euo pipefail

# Bash reads a script as it runs it, and a sitting lasts hours: an edit of this file meanwhile
# would run its new bytes from the old offsets (it did, and lost a sitting's figures). So a
# copy runs, and the repository is found from the original.
if [[ -z ${SWEEP_SCALE_ROOT:-} ]]; then
	SWEEP_SCALE_ROOT=$(cd "$(dirname "$0")/.." && pwd)
	export SWEEP_SCALE_ROOT
	copy=$(mktemp "${TMPDIR:-/tmp}/sweep_scale.XXXXXX.sh")
	cp "$0" "$copy"
	exec bash "$copy" "$@"
fi

rows=200000 cols=20000 density=0.02 k=15
ranks=5:30 seeds=10 shards=3
work=/tmp/didnmf-sweep-scale
kill_after=3 restart=yes restart_after=20 port=27950
run="" stop_after=0 consensus_k=""
extra=()
while (($#)); do
	case $1 in
	--rows) rows=$2; shift 2 ;;
	--cols) cols=$2; shift 2 ;;
	--density) density=$2; shift 2 ;;
	--k) k=$2; shift 2 ;;
	--ranks) ranks=$2; shift 2 ;;
	--seeds) seeds=$2; shift 2 ;;
	--shards) shards=$2; shift 2 ;;
	--work) work=$2; shift 2 ;;
	--kill-after) kill_after=$2; shift 2 ;;
	--restart) restart=$2; shift 2 ;;
	--restart-after) restart_after=$2; shift 2 ;;
	--port) port=$2; shift 2 ;;
	--run) run=$2; shift 2 ;;
	--stop-after) stop_after=$2; shift 2 ;;
	--consensus) consensus_k=$2; shift 2 ;;
	--) shift; extra=("$@"); break ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "sweep_scale.sh: unknown flag $1 (see --help)" >&2; exit 2 ;;
	esac
done
case $restart in yes | no) ;; *) echo "sweep_scale.sh: --restart yes or no, got $restart" >&2; exit 2 ;; esac

say() { echo "sweep_scale: $*" >&2; }
root=$SWEEP_SCALE_ROOT
mkdir -p "$work/bin"
work=$(cd "$work" && pwd)
say "building didnmf and the generator into $work/bin"
(cd "$root" && go build -o "$work/bin/didnmf" ./cmd/didnmf && go build -o "$work/bin/sweepscale" ./bench/sweepscale)
didnmf=$work/bin/didnmf

# The matrix, made once per shape.
x=$work/x_${rows}x${cols}_d${density}_k${k}.npz
if [[ ! -f $x ]]; then
	say "generating $x"
	/usr/bin/time -f "sweep_scale: generated in %e s wall, %U+%S s CPU, %M KB peak" \
		"$work/bin/sweepscale" -rows "$rows" -cols "$cols" -density "$density" -k "$k" -out "$x"
fi

# A fresh run directory: the nodes' data dirs, the secret, the logs and the sweep's output.
resume=()
if [[ -n $run ]]; then
	[[ -d $run ]] || { echo "sweep_scale.sh: --run $run is not a directory" >&2; exit 2; }
	run=$(cd "$run" && pwd)
	compgen -G "$run/sweep/runs/k*.json" >/dev/null && resume=(--resume)
else
	run=$work/run-$(date -u +%Y%m%dT%H%M%S)
	mkdir -p "$run"
fi
chunk=1 # this chunk of the sweep: 1 + the sweep logs of earlier ones
for f in "$run"/sweep.log*; do [[ -e $f ]] && chunk=$((chunk + 1)); done
[[ -f $run/sweep.log ]] && mv "$run/sweep.log" "$run/sweep.log.$((chunk - 1))"
[[ -f $run/killed ]] && kill_after=1000000 # a member was killed in an earlier chunk
secret=$run/cluster.secret
declare -a pids
cleanup() {
	for p in "${pids[@]}"; do
		[[ -n $p ]] && kill "$p" 2>/dev/null || true
	done
}
trap cleanup EXIT
gossip() { echo "127.0.0.1:$((port + $1))"; }
start_member() { # start_member I [LOG SUFFIX]
	local i=$1 join=()
	((i > 1)) && join=(--join "$(gossip 1)")
	"$didnmf" serve --bind "$(gossip "$i")" --name "scale-$i" --data-dir "$run/node$i" --data-root "$work" \
		--secret-file "$secret" "${join[@]}" >"$run/node$i${2:-}.log" 2>&1 &
	pids[i]=$!
	disown "${pids[i]}" # its SIGKILL is ours: no job-control notice
}
members() { "$didnmf" status --cluster "$(gossip 1)" --secret-file "$secret" 2>/dev/null | awk '$2 == "member"' | wc -l; }
wait_members() { # wait_members N
	for _ in $(seq 1 120); do
		(($(members) == $1)) && return 0
		sleep 1
	done
	say "the cluster did not reach $1 members"; return 1
}
# hwm PID: the process's peak resident set (kB); cpu PID: its user+system seconds.
hwm() { awk '/^VmHWM/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }
cpu() { awk -v t="$(getconf CLK_TCK)" '{printf "%.1f", ($14 + $15) / t}' "/proc/$1/stat" 2>/dev/null || echo 0; }

for f in "$run"/node*.log; do [[ -f $f ]] && mv "$f" "$f.$((chunk - 1))"; done
for i in 1 2 3; do
	start_member "$i"
	# The others join through member 1: wait until it answers (on --run its secret is already
	# there, so the secret's existence says nothing about its listening).
	((i == 1)) && { for _ in $(seq 1 50); do [[ -f $secret ]] && break; sleep 0.2; done; wait_members 1; }
done
wait_members 3
say "3 members up on $(gossip 1)..$(gossip 3); sweeping $x (ranks $ranks, $seeds seeds, $shards shards)"

out=$run/sweep
load0=$(cut -d' ' -f1-3 /proc/loadavg)
start=$(date +%s.%N)
/usr/bin/time -o "$run/driver.time" -f "%e %U %S %M" \
	"$didnmf" sweep --cluster "$(gossip 1)" --secret-file "$secret" --input "$x" --ranks "$ranks" --seeds "$seeds" \
	--shards "$shards" --out "$out" "${resume[@]}" "${extra[@]}" >"$run/sweep.log" 2>&1 &
sweep_pid=$!
stopped=""

# Follow the sweep: kill the third member once kill_after runs ended, restart it if asked;
# sample the load average every 5 s.
killed_at="" restarted_at="" killed_hwm=0 killed_cpu=0 killed_pid=${pids[3]}
: >"$run/load"
while kill -0 "$sweep_pid" 2>/dev/null; do
	sleep 5
	cut -d' ' -f1 /proc/loadavg >>"$run/load"
	ended=$(grep '^  \[[0-9]*/[0-9]*\]' "$run/sweep.log" | grep -vc ': resumed' || true)
	if ((stop_after > 0)) && [[ -z $stopped ]] && (($(date +%s) - ${start%.*} >= stop_after)); then
		driver=$(pgrep -P "$sweep_pid" -x didnmf || true)
		say "stopping this chunk: SIGKILL to the sweep's driver (pid ${driver:-?}) after $stop_after s; go on with --run $run"
		[[ -n $driver ]] && kill -9 "$driver"
		stopped=yes
	fi
	if [[ -z $killed_at ]] && ((ended >= kill_after)); then
		killed_hwm=$(hwm "$killed_pid") killed_cpu=$(cpu "$killed_pid")
		kill -9 "$killed_pid"
		killed_at=$SECONDS
		echo "chunk $chunk, after $ended runs" >"$run/killed"
		say "killed scale-3 (pid $killed_pid) with SIGKILL after $ended runs ended"
		pids[3]=""
	fi
	if [[ $restart == yes && -n $killed_at && -z $restarted_at ]] && ((SECONDS - killed_at >= restart_after)); then
		start_member 3 .restarted
		restarted_at=$SECONDS
		say "restarted scale-3 (pid ${pids[3]})"
	fi
done
status=0
wait "$sweep_pid" || status=$?
end=$(date +%s.%N)
load1=$(cut -d' ' -f1-3 /proc/loadavg)
[[ $restart == yes && -n $restarted_at ]] && wait_members 3 || true
# GNU time writes "Command terminated by signal 9" first when the driver was killed.
read -r d_wall d_user d_sys d_kb < <(tail -n 1 "$run/driver.time") || true
declare -A m_hwm m_cpu
for i in 1 2 3; do
	if [[ -n ${pids[i]:-} ]]; then m_hwm[$i]=$(hwm "${pids[i]}") m_cpu[$i]=$(cpu "${pids[i]}"); else m_hwm[$i]=0 m_cpu[$i]=0; fi
done
tail -n 6 "$run/sweep.log" >&2
# This chunk, a line of chunks.tsv: wall s, members' CPU s, driver CPU s, runs ended (not
# resumed), the members' peak RSS (kB, the killed one's before its kill too) and the driver's.
ended=$(grep '^  \[[0-9]*/[0-9]*\]' "$run/sweep.log" | grep -vc ': resumed' || true)
[[ -f $run/chunks.tsv ]] || echo -e "chunk\twall_s\tmembers_cpu_s\tdriver_cpu_s\truns_ended\tpeak_member_kb\tpeak_driver_kb\tload_mean" >"$run/chunks.tsv"
python3 - "$run/chunks.tsv" <<EOF2
import statistics
loads = [float(l) for l in open("$run/load") if l.strip()] or [0]
cpu = ${m_cpu[1]} + ${m_cpu[2]} + ${m_cpu[3]} + $killed_cpu
peak = max(${m_hwm[1]}, ${m_hwm[2]}, ${m_hwm[3]}, $killed_hwm)
open("$run/chunks.tsv", "a").write("%d\t%.0f\t%.0f\t%.1f\t%d\t%d\t%d\t%.1f\n" % ($chunk, $end - $start, cpu,
    float("${d_user:-0}") + float("${d_sys:-0}"), $ended, peak, ${d_kb:-0}, statistics.mean(loads)))
EOF2
if [[ -n $stopped ]]; then
	say "chunk $chunk stopped after $stop_after s with $ended runs ended; its figures are in $run/chunks.tsv; go on with --run $run"
	exit 0
fi
if ((status != 0)) || [[ ! -f $out/sweep.json ]]; then
	say "the sweep failed (exit status $status): $run/sweep.log"
	exit 1
fi
[[ -n $killed_at || -f $run/killed ]] || say "warning: the sweep ended before $kill_after runs had: no member was killed"

# The summary, from sweep.json and the measurements.
python3 - "$out/sweep.json" <<EOF
import json, os, statistics, sys
rep = json.load(open(sys.argv[1]))
runs = rep["runs"]
secs = [r["seconds"] for r in runs]
features = $cols
spectra = sum(r["k"] * features * 8 for r in runs)
files = sum(os.path.getsize(os.path.join(os.path.dirname(sys.argv[1]), f)) for f in os.listdir(os.path.dirname(sys.argv[1])) if f.endswith(".npy"))
loads = [float(l) for l in open("$run/load") if l.strip()] or [0]
busy = rep.get("cores_busy") or {}
failed = rep.get("failed") or []
kb = lambda v: "%.0f MB" % (int(v) / 1024)
print("sweep_scale summary")
print("  matrix      %s: $rows x $cols, density $density, K=$k planted" % "$x")
print("  sweep       ranks %s x %d seeds = %d runs, %d shards a run, on 3 members; %d failed" % (rep["ranks"], rep["seeds"], len(runs), rep["shards"], len(failed)))
killed = "$killed_at" != ""
if killed:
    print("  kill        scale-3 killed with SIGKILL after $kill_after runs ended%s" % ("; restarted $restart_after s later" if "$restart" == "yes" else "; not restarted"))
elif os.path.exists("$run/killed"):
    print("  kill        scale-3 killed with SIGKILL in an earlier chunk (%s)" % open("$run/killed").read().strip())
else:
    print("  kill        none: the sweep ended before $kill_after runs had")
import glob
log = open("$run/sweep.log").read()
recovered = sum(open(f).read().count('msg="recovering the job"') for f in glob.glob("$run/node*.log*"))
print("  recovery    %d job recoveries logged by the members (rollbacks, takeovers), %d runs run again" % (
    recovered, log.count("; running it again")))
print("  suggested   K=%d (%s); %d runs capped" % (rep["suggested_k"], rep["rule"], rep["capped_runs"]))
print("  wall        %.0f s (sweep.json %.0f s); per run: median %.1f s, min %.1f, max %.1f; iterations median %d" % (
    $end - $start, rep["seconds"], statistics.median(secs), min(secs), max(secs), statistics.median(r["iterations"] for r in runs)))
print("  CPU         members %.0f s (sweep.json cores_busy; %.0f%% of %d cores), driver %.1f s; load average 1-min: %.1f..%.1f (mean %.1f; at start %s, at end %s)" % (
    busy.get("cpu_seconds", 0), 100 * busy.get("share", 0), busy.get("cores", 0), float("${d_user:-0}") + float("${d_sys:-0}"),
    min(loads), max(loads), statistics.mean(loads), "$load0", "$load1"))
if killed:
    print("  members     CPU s: scale-1 ${m_cpu[1]}, scale-2 ${m_cpu[2]}, scale-3 ${killed_cpu} (killed) + ${m_cpu[3]} (restarted)")
    print("  peak RSS    scale-1 %s, scale-2 %s, scale-3 %s (until killed) / %s (restarted), driver %s" % (
        kb(${m_hwm[1]}), kb(${m_hwm[2]}), kb($killed_hwm), kb(${m_hwm[3]}), kb(${d_kb:-0})))
else:
    print("  members     CPU s: scale-1 ${m_cpu[1]}, scale-2 ${m_cpu[2]}, scale-3 ${m_cpu[3]}")
    print("  peak RSS    scale-1 %s, scale-2 %s, scale-3 %s, driver %s" % (
        kb(${m_hwm[1]}), kb(${m_hwm[2]}), kb(${m_hwm[3]}), kb(${d_kb:-0})))
print("  spectra     the driver held %d runs' bases: %.1f MB (sum of K x %d features x 8 bytes); .npy written: %.1f MB" % (
    len(runs), spectra / 1e6, features, files / 1e6))
import csv
chunks = list(csv.DictReader(open("$run/chunks.tsv"), delimiter="\t"))
if len(chunks) > 1:
    print("  chunks      %d (the driver killed after --stop-after, then resumed): wall %.0f s, members' CPU %.0f s, driver CPU %.0f s in all; member peak %s, driver peak %s" % (
        len(chunks), sum(float(c["wall_s"]) for c in chunks), sum(float(c["members_cpu_s"]) for c in chunks if c["members_cpu_s"] != "NA"),
        sum(float(c["driver_cpu_s"]) for c in chunks), kb(max(int(c["peak_member_kb"]) for c in chunks)), kb(max(int(c["peak_driver_kb"]) for c in chunks))))
    for c in chunks:  # NA: a chunk whose members' CPU was not measured
        print("              chunk %s: %s s wall, %s s members' CPU, %s runs ended, load %s" % (c["chunk"], c["wall_s"], c["members_cpu_s"], c["runs_ended"], c["load_mean"]))
print("  output      $out")
if failed or rep["suggested_k"] <= 0 and not rep.get("cannot_tell"):
    sys.exit(1)
EOF
[[ -n $consensus_k ]] || exit 0

# cNMF's consensus of rank K on the same members: its time, CPU and memory alone (each
# member's peak RSS is reset first: "5" into clear_refs resets VmHWM).
cout=$run/consensus_$consensus_k
rm -rf "$cout"
c_cpu0=0
for i in 1 2 3; do
	[[ -n ${pids[i]:-} ]] || continue
	echo 5 >"/proc/${pids[i]}/clear_refs" 2>/dev/null || true
	c_cpu0=$(python3 -c "print($c_cpu0 + $(cpu "${pids[i]}"))")
done
say "consensus of K=$consensus_k into $cout"
c_start=$(date +%s.%N)
c_status=0
/usr/bin/time -o "$run/consensus.time" -f "%e %U %S %M" "$didnmf" consensus --cluster "$(gossip 1)" --secret-file "$secret" \
	--sweep "$out" --k "$consensus_k" --input "$x" --out "$cout" >"$run/consensus.log" 2>&1 || c_status=$?
c_end=$(date +%s.%N)
tail -n 4 "$run/consensus.log" >&2
read -r c_wall c_user c_sys c_kb < <(tail -n 1 "$run/consensus.time") || true
c_cpu1=0 c_peaks=""
for i in 1 2 3; do
	[[ -n ${pids[i]:-} ]] || continue
	c_cpu1=$(python3 -c "print($c_cpu1 + $(cpu "${pids[i]}"))")
	c_peaks+=" scale-$i $(($(hwm "${pids[i]}") / 1024)) MB"
done
printf 'consensus   K=%s: exit %s; wall %.1f s; CPU: members %.1f s, client %.1f s; peak RSS:%s, client %s MB; output %s\n' \
	"$consensus_k" "$c_status" "$(python3 -c "print($c_end - $c_start)")" "$(python3 -c "print($c_cpu1 - $c_cpu0)")" \
	"$(python3 -c "print(${c_user:-0} + ${c_sys:-0})")" "$c_peaks" "$((${c_kb:-0} / 1024))" "$cout"
exit "$c_status"
