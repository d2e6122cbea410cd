// Package superblock is the on-disk metadata format of raidd: encoding,
// decoding and checksumming of a member's superblock, and the choice between
// its two copies. It is pure (it imports only the standard library, does no
// I/O beyond the io.ReaderAt / io.WriterAt it is handed, and never syncs) and
// it never panics on input read from disk.
//
// It does not interpret the array: it checks that the level is one of 0, 1,
// 5 and 10 and that the fields are consistent with each other, and leaves
// assembly (which members are current, stale or split-brained) to package
// raid.
//
// # Member header
//
// Every member starts with a reserved header of HeaderSize (1 MiB); the
// array's data region starts at Meta.DataOffset (HeaderSize by default).
//
//	offset     size     content
//	0          4096     reserved, zero (tools probing byte 0 see nothing)
//	4096       4096     slot 0 (SlotOffset(0))
//	8192       4096     slot 1 (SlotOffset(1))
//	12288      4096     in-use block (InUseOffset), zero when nobody holds the member
//	16384      49152    reserved, zero
//	65536      983040   write-intent bitmap area (BitmapOffset, BitmapBytes)
//	1048576    ...      write-hole log area (LogOffset, LogLength), parity
//	                    arrays with consistency policy "ppl" only
//	...        ...      data region (DataOffset: HeaderSize without a log)
//
// # Slot layout
//
// A slot is SlotSize (4096) bytes, all integers little-endian, int32/int64
// in two's complement:
//
//	offset  size  field
//	0       8     Magic "RAIDDSB\x00"
//	8       4     Version uint32 (= 1)
//	12      4     Flags uint32: incompatible features; bit 0 FlagChecksums, bit 1 FlagLog (a log area)
//	16      16    ArrayUUID
//	32      64    Name: UTF-8 bytes, NUL padded (no terminator at 64 bytes)
//	96      4     Level uint32: 0, 1, 5, 6 or 10
//	100     4     Layout uint32: 0 = default
//	104     8     ChunkSize uint64, bytes
//	112     4     RaidDisks uint32: number of roles
//	116     4     Role int32: this member's role, -1 = spare
//	120     16    MemberUUID: this member
//	136     8     DataOffset uint64, bytes
//	144     8     DataSize uint64, bytes
//	152     8     Events uint64
//	160     1     State uint8 (ArrayState)
//	161     3     reserved, zero
//	164     4     RebuildRole int32, -1 = none
//	168     8     RebuildCheckpoint uint64, data-region bytes
//	176     8     BitmapRegion uint64, data bytes per bitmap bit (0 = no bitmap)
//	184     8     CreateTime int64, unix nanoseconds
//	192     8     UpdateTime int64, unix nanoseconds
//	200     4     member count uint32 (1..64)
//	204     4     reserved, zero
//	208     8     DegradedEvents uint64, 0 = every role in sync
//	216     8     Scrub uint64: bit 63 set = scrub running (bit 62: repairing, bits 0..61: row it resumes at); clear = unix seconds the last scrub finished (0 = never)
//	224     8     ChecksumOffset uint64, bytes (0 without FlagChecksums)
//	232     8     ChecksumLength uint64, bytes (0 without FlagChecksums)
//	240     8     LogOffset uint64: the write-hole log area (0 = none)
//	248     8     LogLength uint64, bytes (0 = none; FlagLog set otherwise)
//	256     1536  member table: 64 entries of 24 bytes
//	1792    2300  reserved, zero
//	4092    4     CRC32C (Castagnoli) of bytes [0, 4092)
//
// A member table entry (24 bytes, entry i at 256 + 24*i):
//
//	offset  size  field
//	0       16    UUID
//	16      4     Role int32, -1 = none
//	20      1     State uint8 (MemberState): 0 active, 1 rebuilding, 2 failed,
//	              3 spare, 4 removed, 5 replacing (a raidd replace copy in
//	              progress onto this member, for Role; RebuildRole and
//	              RebuildCheckpoint record its progress; older builds
//	              refuse the table)
//	21      3     reserved, zero
//
// # In-use block
//
// The in-use block records which process holds the member open for
// writing (InUse): a marker in the member's own bytes, so that a second
// raidd reaching the same bytes under another name (a loop device over the
// member file, a second host on shared storage) sees it where advisory
// file locks cannot reach. The holder writes it when it claims the member,
// refreshes Heartbeat while it holds it and zeroes the block when it lets
// go; package raid never reads it. It was added after slot Version 1 in
// bytes that format kept zero and never read, so it is a compatible
// extension: the slots, their Version and golden bytes are unchanged, an
// older raidd ignores the block, and zeroes read as "no holder"
// (ErrNoInUse). Integers are little-endian:
//
//	offset  size  field
//	0       8     Magic "RAIDDIU\x00"
//	8       4     Version uint32 (= 1)
//	12      4     PID uint32
//	16      8     ProcStart uint64, clock ticks after boot (/proc/PID/stat field 22)
//	24      16    BootID (/proc/sys/kernel/random/boot_id)
//	40      8     Since int64, unix nanoseconds
//	48      8     Heartbeat int64, unix nanoseconds
//	56      8     PIDNS uint64: inode of the holder's PID namespace
//	64      64    Host: UTF-8, NUL padded
//	128     256   Path: UTF-8, NUL padded
//	384     3708  reserved, zero
//	4092    4     CRC32C (Castagnoli) of bytes [0, 4092)
//
// testdata/inuse.hex pins its bytes as testdata/golden.hex pins a slot's.
//
// # Invariants
//
//   - Encoding is canonical. Reserved bytes, Name padding and the member
//     entries past the count are zero, and Decode rejects a slot where they
//     are not (ErrCorrupt). So Decode(Encode(m)) equals m for every m that
//     passes Validate, and Encode(Decode(b)) equals b for every b that Decode
//     accepts. The fuzz targets check both.
//   - Decode accepts only what Validate accepts: a slot whose checksum
//     matches but whose fields break a rule is ErrCorrupt, never a Meta.
//   - The checksum covers every byte of the slot except itself, reserved
//     bytes included.
//   - Update m.Events, then Write m: the update goes to slot Events%2
//     (bbolt's txid%2 meta pages), so consecutive updates alternate slots
//     and a torn write of one slot leaves the previous update readable in
//     the other. Read returns the valid slot with the higher Events.
//   - Both slots of a member always describe the same ArrayUUID and
//     MemberUUID; Read refuses a member where they do not (ErrSlotMismatch),
//     since that means it was re-created without Erase.
//
// # Errors
//
// Read and Decode distinguish "not a raidd member" (ErrNoMagic) from "a
// damaged member" (ErrVersion, ErrChecksum, ErrCorrupt), so the caller can
// say which. Validate reports every problem at once, each as a *FieldError
// naming the field.
package superblock
