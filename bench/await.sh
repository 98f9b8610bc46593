# Sourced by bench/spill_workload.sh and bench/spill_kernel.sh: the wait
# for a workload that prints a marker line at each step of its protocol.
# Needs T (its output is $T/out), PID (the workload) and PHASE_TIMEOUT.

# await MARKER [SECONDS]: wait until the workload printed a line starting
# with MARKER; 1 if it exited first, 2 if SECONDS (default PHASE_TIMEOUT)
# passed first.
await() {
	deadline=$(($(date +%s) + ${2:-$PHASE_TIMEOUT}))
	while ! grep -q "^$1" "$T/out"; do
		kill -0 "$PID" 2>/dev/null || return 1
		[ "$(date +%s)" -lt "$deadline" ] || return 2
		sleep 0.05
	done
}
