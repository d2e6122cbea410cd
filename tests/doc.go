// Package tests holds raidd's cross-package and end-to-end tests: the real
// raidd binary served to real NBD clients (nbdinfo, nbdcopy, qemu-img,
// qemu-io, fio's nbd engine) on file and loop-device members, degraded
// serving, rebuild and replace while serving, crash recovery after SIGKILL,
// a raw-socket client sending malformed requests, and a lint of the import
// graph. TestKernel boots a Linux guest under QEMU (TCG) whose kernel
// attaches exports as /dev/nbdX with the commands of
// contrib/systemd/raidd-nbd@.service (guest/init.sh is its /init). Tests
// that need a tool or kernel feature this machine lacks skip with a message
// saying what is missing; RAIDD_REQUIRE_KERNEL=1 turns TestKernel's skip
// into a failure.
package tests
