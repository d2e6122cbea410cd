//go:build linux

package parity_test

import (
	"io"
	"os"
	"runtime"
	"syscall"
	"testing"
	"unsafe"

	"github.com/raidd/raidd/internal/ntcopy"
	"github.com/raidd/raidd/raid/internal/parity"
)

// BenchmarkReceiveRow measures the memory floor of a RAID5 whole-stripe
// write received from a socket (bench/README.md, "RAID5 sequential
// writes: the memory floor"): rows of three 64 KiB data chunks arrive on
// a unix socket (a writer goroutine keeps it full) and go into a 1 GiB
// mapping, which stands for the members' pages, out of the CPU's cache
// as theirs are; the parity goes into a second mapping. The reader's CPU
// time per GB received is reported as cpu-ms/GB.
//
//   - in-place: received into the row's pages, parity XORed from them
//     (what raid/receivestripes.go does);
//
//   - buffer+ntcopy, buffer+copy: received into one reused buffer (in the
//     cache), parity XORed from it, then copied into the row's pages with
//     non-temporal stores or the built-in copy;
//
//   - recv-in-place, recv-buffer: the receive alone, for reference.
//
//     go test -run '^$' -bench BenchmarkReceiveRow -benchtime 20000x ./raid/internal/parity
func BenchmarkReceiveRow(b *testing.B) {
	const chunk, rowsIn = 64 << 10, (1 << 30) / (3 * 64 << 10)
	mem := mmap(b, rowsIn*3*chunk)
	par := mmap(b, rowsIn*chunk)
	buf := make([]byte, 3*chunk)
	for _, mode := range []string{"in-place", "buffer+ntcopy", "buffer+copy", "recv-in-place", "recv-buffer"} {
		b.Run(mode, func(b *testing.B) {
			fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer syscall.Close(fds[1])
			go func() {
				defer syscall.Close(fds[0])
				src := make([]byte, 1<<20)
				for i := range src {
					src[i] = byte(i * 7)
				}
				for {
					if _, err := syscall.Write(fds[0], src); err != nil {
						return
					}
				}
			}()
			recv := func(p []byte) {
				for got := 0; got < len(p); {
					k, err := syscall.Read(fds[1], p[got:])
					if err != nil || k == 0 {
						b.Fatal("read", err)
					}
					got += k
				}
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ResetTimer()
			start := threadCPU()
			for i := range b.N {
				r := i % rowsIn
				row, p := mem[r*3*chunk:(r+1)*3*chunk], par[r*chunk:(r+1)*chunk]
				switch mode {
				case "in-place":
					recv(row)
					parity.XORStream(p, [][]byte{row[:chunk], row[chunk : 2*chunk], row[2*chunk:]})
				case "buffer+ntcopy", "buffer+copy":
					recv(buf)
					parity.XORStream(p, [][]byte{buf[:chunk], buf[chunk : 2*chunk], buf[2*chunk:]})
					if mode == "buffer+copy" {
						copy(row, buf)
					} else {
						ntcopy.Copy(row, buf)
					}
				case "recv-in-place":
					recv(row)
				case "recv-buffer":
					recv(buf)
				}
			}
			cpu := threadCPU() - start
			b.SetBytes(3 * chunk)
			b.ReportMetric(float64(cpu)/1e6/(float64(b.N)*3*chunk/1e9), "cpu-ms/GB")
		})
	}
}

// threadCPU returns the calling thread's CPU time in nanoseconds (the
// caller is locked to its thread).
func threadCPU() int64 {
	var ts syscall.Timespec
	// CLOCK_THREAD_CPUTIME_ID
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic(e)
	}
	return ts.Nano()
}

func mmap(b *testing.B, n int) []byte {
	m, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED|syscall.MAP_ANON|syscall.MAP_POPULATE)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = syscall.Munmap(m) })
	// Have the kernel and then a non-temporal store write every page once:
	// on these VMs the first access of each kind to a page is slow, and
	// the first mode run would pay for it.
	z, err := os.Open("/dev/zero")
	if err != nil {
		b.Fatal(err)
	}
	defer z.Close()
	if _, err := io.ReadFull(z, m); err != nil {
		b.Fatal(err)
	}
	zero := make([]byte, 64<<10)
	for i := 0; i < n; i += len(zero) {
		ntcopy.Copy(m[i:], zero)
	}
	return m
}
