// Package member provides the real backing devices of a raidd array: a
// regular file or block device (File) and an in-memory device (Memory) for
// tests and benchmarks.
//
// Every type here satisfies raid.Member structurally; this package does not
// import raid so that it stays a leaf of the import graph.
//
// # Invariants
//
//   - Size is fixed when a member is opened or created and never changes, even
//     if the underlying file is resized behind the member's back. A file or
//     device that becomes shorter than Size is detected, by a read meeting
//     end-of-file below Size or by the size check after every write to a
//     regular file, and from then on every call but Sync and Close fails
//     with ErrShrunk (an io.ErrUnexpectedEOF): no write may extend the file
//     again and leave holes that read back as zeroes without an error. The
//     size check costs no system call for writes below the file's last
//     page: it loads a byte of a read-only mapping of that page, which
//     faults once the page lies beyond end-of-file (tail.go). That needs
//     data in the last page (faulting in a hole would allocate it on
//     tmpfs): until the page is written, each write makes an fstat
//     instead, and ReserveTail writes it at once when the owner keeps
//     nothing there (the raid package says so for the space past an
//     array's data region). A shrink of less than a page, which no such
//     write can undo, is reported by the next read or write of the last
//     page.
//   - ReadAt and WriteAt follow io.ReaderAt and io.WriterAt exactly: n <
//     len(p) implies err != nil, and p is never retained after the call
//     returns. A read that reaches Size returns io.EOF; a write that reaches
//     Size writes the part that fits and returns an error wrapping
//     ErrOutOfRange. A member never grows.
//   - Concurrent calls on non-overlapping ranges are safe. Overlapping
//     concurrent writes (or a write overlapping a read) are the caller's bug:
//     the bytes seen are then unspecified, but no memory is corrupted.
//   - Discard makes a range read as zeroes and leaves every byte outside the
//     range untouched, at any byte granularity, or returns an error wrapping
//     errors.ErrUnsupported when it cannot guarantee zeroes.
//   - After Close every method except Size, Path and IsBlockDevice returns an
//     error wrapping os.ErrClosed, including a second Close.
//   - Every system call on a File's descriptor, vectored I/O included, runs
//     under the os.File's reference to it (its own methods or
//     RawConn.Control), never on a saved descriptor number. A Close racing
//     with a call defers close(2) until the call returns, so the number can
//     never be reused by another file underneath a call in flight.
//
// # Members held in memory
//
// A regular file on tmpfs or ramfs (File.InMemory) is read and written
// through a shared mapping of the whole file: each read or write is a
// memory copy instead of a pread or pwrite (2.9 against 0.46 µs for 4 KiB,
// 222 against 57 µs for a 1 MiB read on this project's VMs), and the
// mapping shares its pages with the system calls, so both may be mixed.
// Reads use the mapping only for pages known to hold data (a bit per page,
// set by SEEK_DATA at Open and by writes, cleared by Discard, Trim and
// ZeroRange), because a load from a tmpfs hole allocates it; the last page
// and anything that faults (a shrunk file, a full tmpfs) take the system
// call, which reports the error as before. See mapped.go. The mapped pages
// count in raidd's resident set once touched, although they are the tmpfs
// files' own pages.
//
// Such a copy can also checksum what it moves: WriteAtSums, WritevAtSums,
// ReadAtSums and ReadvAtSums (File and Memory) compute the CRC32C of each
// 4 KiB block in the copy's own pass (crc32c.CopySums), for package raid's
// per-block checksums, and report whether they did; a request the mapping
// does not serve takes the plain path and reports that it did not. See
// sums.go.
//
// FillAt (File and Memory) lets a caller compute a write's bytes straight
// into the member's memory instead of writing them from a buffer: RAID5
// computes a full stripe's parity into the parity member so, saving the
// buffer's copy. It follows the mapped write's rules (the mapped range
// only, faults caught) and reports false where it cannot; the caller then
// writes the bytes the ordinary way. See fill.go.
//
// # Discard, Trim and ZeroRange on block devices
//
// Discard must guarantee zeroes, so on a block device it uses
// fallocate(FALLOC_FL_PUNCH_HOLE|FALLOC_FL_KEEP_SIZE), which the kernel turns
// into a discard that guarantees zeroes (REQ_OP_WRITE_ZEROES with unmap), and
// falls back to ioctl(BLKZEROOUT), which writes zeroes. A bare BLKDISCARD is
// deliberately not used for Discard: devices may ignore it or return stale
// data afterwards. File.Trim issues BLKDISCARD for callers that only want to
// release space and do not rely on the contents.
//
// Block devices accept these commands only on logical-block boundaries, so
// File splits a range into an aligned middle handled by the kernel and
// unaligned edges that it overwrites with zeroes through WriteAt.
//
// # Direct I/O
//
// With Options.Direct the file is opened with O_DIRECT, bypassing the page
// cache. The kernel then requires buffer addresses, offsets and lengths
// aligned: File asks it how (statx STATX_DIOALIGN: the device's logical
// block size and DMA alignment, typically 512 bytes) and falls back to 4096
// bytes (DirectAlignment), which covers every common device, when it does
// not say. Requests that are not aligned go through a pooled bounce buffer
// aligned to DirectAlignment, and unaligned writes read-modify-write their
// edge blocks. Callers never issue overlapping requests concurrently, so no
// lock protects the edge blocks. In direct mode Size is rounded down to a
// multiple of DirectAlignment so that no direct write ever extends a file.
//
// Vectored calls (ReadvAt, WritevAt: the engine's back-to-back extents on
// one member) stay one system call in direct mode: one preadv or pwritev
// straight to the caller's buffers when the offset and every buffer's
// address and length are aligned, else one read or write of one bounce
// buffer that covers the whole run (runs beyond 32 MiB take one call per 32
// MiB). A 1 MiB request on a four-member RAID0 with 64 KiB chunks thus
// costs each member one 256 KiB I/O, not four of 64 KiB. WritevAtDSync
// is WritevAt made durable by the same call (pwritev2 with RWF_DSYNC, a
// FUA write on a block device), for the engine's write-hole log records;
// on a block device without FUA, where the kernel would flush twice for
// it, a write and an fdatasync (one flush).
//
// Reads that reach a direct member from different callers, back to back
// on the member, are merged as a block layer's queue merges requests while
// the device is busy (readq.go): a read near others on the member (within
// MaxIO, the device's max_sectors_kb, of one in flight, waiting or just
// completed) waits while another is in flight (on a device whose sysfs
// queue/rotational says 0, an SSD or NVMe, only behind 16 in flight: such
// a device gains more from reads in parallel than from larger ones, and
// the kernel's "none" scheduler leaves it its queue depth likewise); when
// that one completes,
// the oldest waiting read with a waiting neighbour takes its place with
// every waiting read that extends its run, up to MaxIO, in one preadv
// straight into the callers' buffers. A read far from every other one
// (random reads), or one arriving at an idle member, goes out at once. A
// merged read that fails or comes up short is redone read by read, so an
// error reaches only the callers whose bytes it covers. Each caller's
// bytes are read while its call is in progress, so a merged read sees
// every write that completed before its callers' reads began. Members
// held in memory and page-cache members do not queue: nothing waits there
// that a merge could save. On bench/disks.sh this turns RAID6×4 member
// 2's third read per 256 KiB of 1 MiB sequential reads (its 2-row data
// runs cross the row where 1 MiB requests end) partly into merged reads.
//
// A direct member also reads ahead when its caller says what comes next
// (ReadvAhead, readahead.go): the engine, for a sequential client stream,
// asks a member whose last read of a request ends where its next chunks
// hold the next request's data (and only those chunks: a run it will not
// read whole is not worth reading part of) to read them in the same
// preadv. The bytes wait in a pooled buffer (at most 4 per member, 1 MiB
// each, dropped after 200 ms unread) and serve the next read they cover,
// once, which waits for them if their read is still in flight. Only the
// caller knows which chunks are data and what the stream reads next; only
// the member sees every write to itself, so it keeps them coherent with a
// sequence lock over its writes: every system call that changes its bytes
// (pwrite, pwritev, pwritev2 with RWF_DSYNC, the bounce path's writes,
// Discard, Trim, ZeroRange) counts as started before and ended after, a
// read-ahead starts only while no write is in flight, and is kept and
// served only while no write has started since it was issued. So a read
// never returns bytes older than a write, anywhere on the member, that
// completed before the read began. Read-aheads that keep going unread (8
// in a row) make the member ignore the next 256 hints, and a hint for
// bytes another read has in flight, waits for or took among the member's
// last 16 reads is ignored. On bench/disks.sh this takes RAID6×4 member
// 2's third read per 1 MiB request away (bench/README.md, "disks.sh:
// RAID6 sequential reads").
//
// The package is Linux-only: it relies on fallocate, fdatasync and the block
// device ioctls.
package member
