# Shared by bench/disks.sh and bench/checksums.sh: emulated disks (loop
# devices with --direct-io=on, throttled by a cgroup-v1 blkio group) and
# the cleanup of everything a run made. Sourced, not run. The caller sets:
#   prog   its name, for messages
#   work   its tmpfs directory; sock its socket directory
#   cg     the blkio cgroup directory; bps and IOPS the throttle per device
#   loops  and pids: arrays the functions append to

# bench_cleanup: stop the servers, detach the loop devices, remove the
# cgroup and the files; on failure first show the tail of every log.
bench_cleanup() {
	local rc=$? pid dev log
	if [[ $rc != 0 ]]; then
		for log in "$work"/*.log; do
			[[ -s $log ]] && { echo "--- $log" >&2; tail -n 20 "$log" >&2; }
		done
	fi
	for pid in "${pids[@]}"; do
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
		fi
	done
	for dev in "${loops[@]}"; do
		losetup --detach "$dev" 2>/dev/null || echo "$prog: could not detach $dev" >&2
	done
	if [[ -d $cg ]]; then
		rmdir "$cg" 2>/dev/null || echo "$prog: could not remove cgroup $cg" >&2
	fi
	rm -rf "$work" "$sock"
}

# throttled_loop IMG: a loop device with direct I/O over IMG, throttled in
# $cg to $bps bytes and $IOPS operations per second each way, in $disk.
throttled_loop() {
	local dev mm
	dev=$(losetup --find --show --direct-io=on "$1") || die "losetup --direct-io=on $1 failed"
	loops+=("$dev")
	disk=$dev
	mm=$(lsblk -dno MAJ:MIN "$dev" | tr -d ' ')
	echo "$mm $bps" >"$cg/blkio.throttle.read_bps_device"
	echo "$mm $bps" >"$cg/blkio.throttle.write_bps_device"
	echo "$mm $IOPS" >"$cg/blkio.throttle.read_iops_device"
	echo "$mm $IOPS" >"$cg/blkio.throttle.write_iops_device"
}
