#!/usr/bin/env bash
# Runs every test of raidd on a fresh Debian machine: installs the NBD
# clients the end-to-end tests drive, checks formatting and vet, runs the
# whole suite under the race detector, then gives each fuzz target a short run.
# staticcheck comes from the Go module proxy at a pinned version.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
export GOFLAGS="${GOFLAGS:--mod=mod}"

need=()
for tool in nbdinfo:libnbd-bin nbdcopy:libnbd-bin qemu-img:qemu-utils qemu-io:qemu-utils fio:fio nbdkit:nbdkit losetup:mount systemd-analyze:systemd; do
	command -v "${tool%%:*}" >/dev/null 2>&1 || need+=("${tool#*:}")
done
if [ ${#need[@]} -gt 0 ]; then
	echo "== installing ${need[*]}"
	if [ "$(id -u)" -eq 0 ]; then
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
	else
		sudo apt-get update -qq
		sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
	fi
fi

# The kernel tests (tests/kernel_test.go) boot Debian's cloud kernel under
# QEMU (TCG); RAIDD_REQUIRE_KERNEL=1 makes them fail, not skip, when
# something they need is missing.
kneed=()
for tool in qemu-system-x86_64:qemu-system-x86 nbd-client:nbd-client busybox:busybox-static mke2fs:e2fsprogs; do
	command -v "${tool%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${tool%%:*}" ] || kneed+=("${tool#*:}")
done
ls /boot/vmlinuz-*-cloud-amd64 >/dev/null 2>&1 || kneed+=(linux-image-cloud-amd64)
if [ ${#kneed[@]} -gt 0 ]; then
	echo "== installing ${kneed[*]}"
	sudo=(); [ "$(id -u)" -eq 0 ] || sudo=(sudo)
	"${sudo[@]}" apt-get update -qq
	"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${kneed[@]}" >/dev/null
fi
export RAIDD_REQUIRE_KERNEL=1

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
echo "== go vet"
go vet ./...
echo "== staticcheck"
go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
echo "== go test -race"
go test -race -count=1 -timeout 20m ./...
echo "== fuzz (short runs of every target)"
# A failing target prints its output. Go's fuzzer (1.26) has two failures of
# its own that are not findings, and each gets one more run:
#  - "context deadline exceeded" with no input saved: the -fuzztime deadline
#    raced a worker's shutdown (golang/go#75804, fixed in Go 1.27). The rerun
#    gets a count budget (-fuzztime Nx, N = the executions the first run
#    reached), which has no deadline to race and does the same work.
#  - "fuzzing process hung or terminated unexpectedly" (golang/go#56238,
#    #52569): a worker was lost, and the input it held is saved. This counts
#    only if that input fails when replayed alone; if it passes, it is
#    removed and the target fuzzes again.
fuzz() {
	local out saved budget="${FUZZTIME:-10s}" execs
	out=$(mktemp)
	for attempt in 1 2; do
		if go test -run '^$' -fuzz "^$2\$" -fuzztime "$budget" "$1" >"$out" 2>&1; then
			echo "fuzz $1 $2: ok"; rm -f "$out"; return 0
		fi
		cat "$out"
		saved=$(sed -nE "s|^ *Failing input written to (testdata/fuzz/$2/[0-9a-f]+)\$|\1|p" "$out")
		execs=$(sed -nE 's/^fuzz: elapsed: .*, execs: ([0-9]+) .*/\1/p' "$out" | tail -n 1)
		if [ "$attempt" = 1 ] && [ -z "$saved" ] && grep -qx '    context deadline exceeded' "$out" && [ "${execs:-0}" -gt 0 ]; then
			echo "fuzz $1 $2: the fuzztime deadline raced a worker (golang/go#75804), no input saved; fuzzing again for ${execs} executions"
			budget="${execs}x"
			continue
		fi
		if [ "$attempt" = 1 ] && [ -n "$saved" ] && grep -q 'fuzzing process hung or terminated unexpectedly' "$out" &&
			go test -count=1 -run "^$2/$(basename "$saved")\$" "$1" >/dev/null 2>&1; then
			echo "fuzz $1 $2: the fuzzer lost a worker, and the input it saved passes when replayed; fuzzing again"
			rm -f "$1/$saved"
			continue
		fi
		break
	done
	rm -f "$out"; echo "fuzz $1 $2: FAILED"; return 1
}
# Every fuzz target in the tree, found by name, so a new parser's fuzzer
# cannot be forgotten here.
targets=$(grep -rlE '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' --include='*_test.go' . | sort)
[ -n "$targets" ] || { echo "no fuzz targets found"; exit 1; }
for file in $targets; do
	for name in $(sed -nE 's/^func (Fuzz[A-Za-z0-9_]*)\(f \*testing\.F\).*/\1/p' "$file"); do
		fuzz "./$(dirname "${file#./}")" "$name"
	done
done
echo "== all tests passed"
