// Package integrity keeps a CRC32C (Castagnoli, computed by package
// internal/crc32c: hash/crc32's, with AVX-512 where the CPU has it) of
// every 4 KiB block of a member's data region, verifies every
// read against it and updates it with every write and discard. It is a
// wrapper around one member device (Dev), placed by package raid between
// the levels and the devices, so the levels stay unaware of checksums: to
// them a block that fails its checksum is a member read error like a bad
// sector, which they already serve from redundancy and rewrite; the rewrite
// through the Dev stores a fresh checksum.
//
// # Why a member wrapper
//
// A layer at the member is the one place every byte passes on its way to
// and from the disk: client reads and writes, parity read-modify-write,
// resync, rebuild, replace, repair and check. Checksums kept there cover
// parity and mirror copies as well as data, cost no change to the levels,
// and need no knowledge of geometry. The engine (package raid) adds only
// what the wrapper cannot know: that a mismatch must not fail the member,
// the events and counters, and which rows a crash may have left unsealed.
//
// # On-disk format
//
// The checksum area of a member starts at Meta.ChecksumOffset (after the
// header) and holds AreaSize(DataSize) bytes: PageSize (4 KiB) pages, page
// i holding the entries of blocks [i*PerPage, (i+1)*PerPage) (PerPage =
// 1023) as little-endian uint32, and in its last 4 bytes its own CRC32C,
// computed over the page index (uint64, little-endian) followed by the
// first 4092 bytes. The index in the CRC catches a page written to the
// wrong place. An all-zero page is valid: a fresh area reads as holes.
//
//	entry   meaning
//	0       a hole: the block reads as zeroes (never written, trimmed,
//	        or zero-elided); also stored for a block whose CRC is 0
//	other   the CRC32C of the block
//
// A hole needs no CRC: verifying it is a comparison with zeroes.
//
// # Rules
//
//   - Reads: a read of part of a block reads and verifies the whole block.
//     A mismatch is checked again under the block's lock (a write may have
//     been in flight); if it persists the read fails with a *MismatchError
//     (ErrMismatch, EIO) naming the data-region offset of the bad blocks.
//   - Writes: whole blocks get the CRC of their new bytes; a partial block
//     is read, and gets the CRC of old bytes patched with the new ones only
//     if the old bytes matched their entry. Otherwise the old entry is
//     kept, so damage in the bytes the write did not cover stays detectable:
//     the block stays flagged until it is written whole or repaired from
//     redundancy (which rewrites it with the other copy's or parity's
//     bytes, new ones included).
//   - Discards: whole blocks become holes (entry 0); partial blocks as
//     writes of zeroes. A device that cannot discard changes nothing and
//     the caller writes zeroes, which are then written through the Dev.
//   - Damaged checksum pages: a page that fails its own CRC is counted and
//     reported (Config.OnPageRebuilt) and is never trusted as a whole:
//     every entry in it is still compared with its block, an entry that
//     does not match is a mismatch (repaired from redundancy, which stores
//     a fresh entry), and the page is written back with a fresh page CRC.
//   - Crash consistency: entries are cached (Config.CachePages) and written
//     back by Sync before the device is synced, or earlier when the cache
//     is full. Over the bound, clean pages are dropped in CLOCK order: a
//     page used since the scan last passed it gets a second chance, so a
//     page in use stays, as under LRU, without reordering a list on every
//     use. After a crash a block and its entry may disagree only in
//     regions that package raid's write-intent bitmap marks dirty (a bit is
//     on disk before any write to its region and cleared only after a
//     Sync). raid marks those ranges Unseal: there a mismatch is resolved
//     by recomputing the entry from the data (the old or the new bytes,
//     both correct for a write that was never acknowledged as durable), and
//     its resync Seals every row of them.
//   - Copies: data written unchanged to several devices (the copies of a
//     mirror, a role and its replacement) is checksummed once. The caller
//     prepares a Shared with the buffers and each device writes them with
//     WriteShared: the writers split the blocks among themselves in pieces
//     of 16, each waits for the pieces the others claimed, and every
//     device stores the same entries it would have computed. A write that
//     does not cover whole blocks computes its own (its partial blocks
//     depend on each device's old bytes). Over a device that checksums as
//     it copies (below), the first writer claims every piece and its copy
//     computes them; the others write first and then wait for them.
//   - Cost: the hot path allocates nothing (the entries of a request of up
//     to 64 KiB are on its stack, larger ones and the block read for a
//     partial write are pooled); a read costs one CRC pass over the
//     bytes just read, while they are in cache, and one cache lookup per
//     request; a write one CRC pass and the cache update. On a device
//     held in memory (member.File on tmpfs, member.Memory), whose reads
//     and writes are copies, a request of 32 KiB or more of whole blocks has no
//     CRC pass of its own: the device's copy computes the CRCs as it
//     moves the bytes (crc32c.CopySums, through its WriteAtSums,
//     WritevAtSums, ReadAtSums and ReadvAtSums), so the CRC costs the
//     copy's loads instead of a second pass over bytes that have left the
//     first-level cache by then; a read compares those sums with the
//     entries, and only a buffer with a block that matches neither its
//     entry nor, being zero, a hole goes through the usual verification.
//     Checksum pages are written only by Sync, or when dirty pages fill
//     half the cache.
//     I/O outside the data region passes through as it came: a vectored
//     write there (raid's write-hole log record) stays one request.
//   - Concurrency: all methods may be called concurrently on any ranges.
//     Writes, discards and re-verification of a block take a lock per 64
//     KiB granule (striped); the page cache has one mutex, taken once per
//     request to read the entries (a table lookup per page) and once to
//     store them. Lock order: granule locks (ascending), flushMu, mu.
package integrity
