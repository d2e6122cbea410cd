#!/bin/busybox sh
# The init of the Linux guest that tests/kernel_test.go boots under QEMU.
# It drives /dev/nbdX against raidd on the host (10.0.2.2, QEMU user
# networking) through the scenarios of TestKernel and reports each step on
# the second serial port (/dev/ttyS1), one line each:
#
#   RAIDD-STEP <array> <scenario> <step> ok|FAIL [detail]
#   RAIDD-REQ <token> <action> [array]    asks the host to act, then waits for
#   <token> ok|FAIL [detail]              the host's answer on the same port
#   RAIDD-END                             every scenario ran
#
# /etc/raidd-kernel.conf, written by the test, sets ARRAYS and, per array A,
# DEV_A and the functions attach_A and detach_A: the ExecStart and ExecStop
# command lines of contrib/systemd/raidd-nbd@.service, expanded for that
# device. SIZE_A, TRIM_A, FLUSH_A, FUA_A (1 when the export advertises it)
# and BS_A (the unit's block size) are what the kernel must show.

/bin/busybox mkdir -p /proc /sys /dev /tmp /mnt /bin /sbin
/bin/busybox mount -t proc proc /proc
/bin/busybox --install -s /bin
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mount -t tmpfs tmp /tmp
# Busybox runs its own applets before anything on PATH: the e2fsprogs
# tools are called by their full path.
export PATH=/usr/sbin:/usr/bin:/sbin:/bin

exec 3>/dev/ttyS1
stty -F /dev/ttyS1 raw -echo

# Always power off, so QEMU exits (-no-reboot) whatever happens.
trap 'poweroff -f' EXIT

say() { echo "$*" >&3; }

# step ARRAY SCENARIO STEP CMD...: runs CMD and reports it; its output goes
# to the console (ttyS0) for the test log. Returns CMD's status.
step() {
	_a=$1 _s=$2 _n=$3
	shift 3
	_out=$("$@" 2>&1)
	_rc=$?
	[ -n "$_out" ] && echo "[$_a $_s $_n] $_out"
	if [ $_rc -eq 0 ]; then
		say "RAIDD-STEP $_a $_s $_n ok"
	else
		say "RAIDD-STEP $_a $_s $_n FAIL exit $_rc: $(echo "$_out" | tail -n 3 | tr '\n' ' ' | cut -c1-300)"
	fi
	return $_rc
}

# ask TOKEN ACTION [ARRAY]: asks the host and waits for its answer, which
# the reader below files under /tmp/ack/TOKEN. Fails on a FAIL answer.
ask() {
	say "RAIDD-REQ $*"
	while [ ! -s "/tmp/ack/$1" ]; do sleep 0.1; done
	read -r _st _rest <"/tmp/ack/$1"
	[ "$_st" = ok ] || { echo "host: $_st $_rest"; return 1; }
}

mkdir -p /tmp/ack
(while IFS=' ' read -r tok rest; do echo "$rest" >"/tmp/ack/$tok.new" && mv "/tmp/ack/$tok.new" "/tmp/ack/$tok"; done </dev/ttyS1) &

for m in $(cat /etc/modules.order); do
	insmod "/lib/modules/$m" || say "RAIDD-STEP guest boot insmod FAIL $m"
done
ip link set lo up
ip link set eth0 up
ip addr add 10.0.2.15/24 dev eth0
ip route add default via 10.0.2.2
. /etc/raidd-kernel.conf
say "RAIDD-STEP guest boot up ok $(cut -d' ' -f1 /proc/uptime)"

sysfs() { cat "/sys/block/$1/queue/$2"; }

# check_eq WANT GOT WHAT
check_eq() {
	[ "$1" = "$2" ] && return 0
	echo "$3: want $1, got $2"
	return 1
}

# nbd_errors DEV: fails with the kernel's messages about DEV that report
# an I/O error or a lost connection, if there are any. (A request the kernel
# timed out and sent again on another connection, which then succeeded, is
# not an error the guest sees; the test logs those retries.)
nbd_errors() {
	dmesg | grep -E "$1([^0-9]|\$)" | grep -iE 'I/O error|EXT4-fs error|journal|control failed|invalid socket|dead|shutting down' && return 1
	return 0
}

# verify_sums FILE: sha256sum -c, printing only what did not match.
verify_sums() {
	_v=$(sha256sum -c "$1" 2>&1)
	_vrc=$?
	echo "$_v" | grep -v ': OK$'
	echo "$(echo "$_v" | grep -c ': OK$') files verified"
	return $_vrc
}

# Scenario 1: attach with the unit's command line (4 connections) and
# check what the kernel made of the export's flags.
attach_checks() {
	a=$1
	eval "d=\$DEV_$a size=\$SIZE_$a trim=\$TRIM_$a flush=\$FLUSH_$a fua=\$FUA_$a bs=\$BS_$a"
	step "$a" attach nbd-client "attach_$a" || return 1
	step "$a" attach size check_eq "$size" "$(($(cat /sys/block/$d/size) * 512))" "device bytes"
	if [ "$trim" = 1 ]; then
		step "$a" attach discard test "$(sysfs "$d" discard_max_bytes)" -gt 0
	else
		step "$a" attach discard check_eq 0 "$(sysfs "$d" discard_max_bytes)" discard_max_bytes
	fi
	if [ "$flush" = 1 ]; then wc="write back"; else wc="write through"; fi
	step "$a" attach write_cache check_eq "$wc" "$(sysfs "$d" write_cache)" write_cache
	step "$a" attach fua check_eq "$fua" "$(sysfs "$d" fua)" fua
	step "$a" attach block_size check_eq "$bs/$bs" "$(sysfs "$d" logical_block_size)/$(sysfs "$d" physical_block_size)" "logical/physical block size"
}

# Scenario 2: a file system, written, trimmed, checked and read back.
filesystem() {
	a=$1
	eval "d=\$DEV_$a"
	m=/mnt/$a
	mkdir -p "$m"
	step "$a" fs mkfs /usr/sbin/mke2fs -F -q -t ext4 -N 2048 -J size=4 -E lazy_itable_init=0,lazy_journal_init=0 "/dev/$d" || return 1
	step "$a" fs mount mount -t ext4 "/dev/$d" "$m" || return 1
	step "$a" fs write_fsync sh -c "dd if=/dev/urandom of=$m/fs.bin bs=1M count=4 conv=fsync && sha256sum $m/fs.bin >/tmp/sums-$a"
	# Space to trim: a file written and deleted.
	step "$a" fs fstrim sh -c "dd if=/dev/urandom of=$m/gone bs=1M count=2 conv=fsync && rm $m/gone && sync && fstrim -v $m"
	step "$a" fs umount umount "$m"
	step "$a" fs drop_caches sh -c 'sync; echo 3 >/proc/sys/vm/drop_caches'
	step "$a" fs fsck /usr/sbin/e2fsck -fn "/dev/$d"
	step "$a" fs remount mount -t ext4 "/dev/$d" "$m" || return 1
	step "$a" fs reread verify_sums "/tmp/sums-$a"
}

# Scenario 3: the host fails a member while this writes, adds a spare and
# waits for its rebuild, all while the file system stays mounted.
writer() {
	m=$1 a=$2 i=0
	while [ ! -e "/tmp/ack/rebuild-$a" ] && [ $i -lt 64 ]; do
		dd if=/dev/urandom of="$m/w$i" bs=64k count=4 conv=fsync 2>/dev/null || exit 1
		sha256sum "$m/w$i" >>"/tmp/sums-$a" || exit 1
		i=$((i + 1))
		[ $i = 1 ] && touch "/tmp/writing-$a"
	done
	echo "$i files written"
}

rebuild() {
	a=$1
	eval "d=\$DEV_$a"
	m=/mnt/$a
	writer "$m" "$a" >"/tmp/writer-$a.out" 2>&1 &
	wpid=$!
	while [ ! -e "/tmp/writing-$a" ] && kill -0 $wpid 2>/dev/null; do sleep 0.05; done
	step "$a" rebuild writing test -e "/tmp/writing-$a"
	step "$a" rebuild host_rebuilt ask "rebuild-$a" fail-and-rebuild "$a"
	wait $wpid
	step "$a" rebuild writer_ok sh -c "cat /tmp/writer-$a.out; exit $?"
	step "$a" rebuild drop_caches sh -c 'sync; echo 3 >/proc/sys/vm/drop_caches'
	step "$a" rebuild reread verify_sums "/tmp/sums-$a"
	step "$a" rebuild no_io_errors nbd_errors "$d"
	step "$a" rebuild umount umount "$m"
	step "$a" rebuild fsck /usr/sbin/e2fsck -fn "/dev/$d"
	step "$a" rebuild host_check ask "check-$a" check "$a"
	step "$a" rebuild remount mount -t ext4 "/dev/$d" "$m"
}

# Scenario 4, all arrays at once since one raidd serves them all: write
# and fsync, the host kills raidd with SIGKILL and starts it again, then
# every device is reconnected with the unit's commands and checked.
crash_write() {
	a=$1 m=/mnt/$1
	step "$a" crash write_fsync sh -c "dd if=/dev/urandom of=$m/crash.bin bs=1M count=2 conv=fsync && sha256sum $m/crash.bin >>/tmp/sums-$a"
}

crash_recover() {
	a=$1
	eval "d=\$DEV_$a"
	m=/mnt/$a
	# The old connections died with raidd: unmount what is left (its last
	# superblock write fails; the journal holds what was fsynced).
	step "$a" crash umount_dead umount "$m"
	step "$a" crash detach "detach_$a"
	step "$a" crash reattach "attach_$a" || return 1
	step "$a" crash mount mount -t ext4 "/dev/$d" "$m" || return 1
	step "$a" crash reread verify_sums "/tmp/sums-$a"
	step "$a" crash umount umount "$m"
	step "$a" crash fsck /usr/sbin/e2fsck -fn "/dev/$d"
}

# Scenario 5: detach, and the device is gone.
detach() {
	a=$1
	eval "d=\$DEV_$a"
	step "$a" detach nbd-client "detach_$a"
	step "$a" detach disconnected sh -c "for i in \$(seq 50); do [ ! -e /sys/block/$d/pid ] && [ \$(cat /sys/block/$d/size) = 0 ] && exit 0; sleep 0.1; done; echo still connected; exit 1"
}

# each FUNC: runs FUNC on every array at once and waits for them (and not
# for the reader of the host's answers, which runs until the end).
each() {
	_pids=
	for _a in $ARRAYS; do
		"$1" "$_a" &
		_pids="$_pids $!"
	done
	wait $_pids
}

for a in $ARRAYS; do
	attach_checks "$a"
done
step all attach host_connections ask conns connections
each filesystem
each rebuild
each crash_write
step all crash host_kill_restart ask crash kill-restart
each crash_recover
for a in $ARRAYS; do
	detach "$a"
done
step all detach host_connections ask noconns no-connections
say "RAIDD-END"
