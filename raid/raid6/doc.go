// Package raid6 registers the RAID6 personality: N ≥ 4 members, two parity
// chunks per row, P and Q, in md's default left-symmetric layout for level
// 6 (ALGORITHM_LEFT_SYMMETRIC): in row r P is on member n-1 - (r mod n), Q on
// the member after it, and data chunk i on member (P + 2 + i) mod n. The
// array survives the loss of any two members.
//
// The parity is bit-identical to md's: P is the XOR of the data chunks and
// Q is the Reed-Solomon syndrome over GF(2^8) with generator 2 and
// polynomial 0x11d, data chunk i weighted by 2^i (i counts the data chunks
// from the one after Q, md's syndrome slot order). P and Q of a whole row
// (full stripes, reconstruct-writes, resync, check) are computed in one
// pass over the data by md's gen_syndrome algorithm (syndrome_amd64.s,
// AVX2, or AVX-512 where the CPU has F and BW: Horner's rule from the
// highest data slot down, Q = 2·Q ^ D_z, P ^= D_z, 128 bytes at a time,
// each data byte read once, P and Q written once), 2.6 times as fast as
// the library's one-chunk-at-a-time EncodeIdx with AVX2 (BenchmarkEncode),
// and 1.5 to 1.8 times faster again with AVX-512 for 6 and 10 members. Everything else uses klauspost/reedsolomon with
// WithCustomMatrix (rows of 1s and of 2^i, see Matrix), which makes the
// library's code exactly md's, and WithMaxGoroutines(1): raidd gets its
// parallelism from many stripes in flight. The library also computes a
// row's tail shorter than the kernel's block, and whole rows on CPUs
// without AVX2, on other platforms and with the purego build tag, through
// EncodeIdx, one data chunk at a time into P and Q, which does not
// allocate; its Encode allocates per call on CPUs with GFNI. Deltas
// (read-modify-write, the write-hole log's partial parities) go through
// EncodeIdx too. Reconstruction (degraded reads and writes, rebuild, check with a
// member missing) uses the library's Reconstruct with the same matrix, which
// solves every combination of two missing chunks: data+data, data+P,
// data+Q and P+Q. It may allocate; the healthy paths do not.
//
// # Writes
//
// A write is split by row. On a healthy row the plan with the fewest member
// reads wins (on a tie, the fewest bytes read):
//
//   - full stripe: P and Q are computed from the new data, nothing is read;
//   - reconstruct-write (RCW): read the parts of the data chunks the write
//     does not cover, compute P and Q from scratch;
//   - read-modify-write (RMW): read the old data being replaced, P and Q,
//     and apply the delta (P ^= old ^ new, Q ^= 2^i·(old ^ new)).
//
// On a degraded row (one or two members unreadable, or being rebuilt) the
// write is a reconstruct-write. When every missing data chunk is entirely
// overwritten it reads only the data it does not cover; otherwise it reads
// every readable chunk of the written range, P and Q included, rebuilds the
// missing data's old contents, lays the new data over it, and computes P
// and Q. Data, P and Q are written to every writable member (a member being
// rebuilt included). Reads happen before any write of the row, so a member
// that fails during the reads only changes the plan.
//
// # The write hole
//
// Each row write runs between Op.BeginRow and Op.EndRow, with the
// write-hole log (consistency policy "ppl", the default: a partial
// parity log) planned by Op.PlanRowLog before it reads, as in raid5. The
// record holds both partial parities, P' = P + (the current data of W) and
// Q' = Q + (the sum of 2^i times data index i's current bytes in W), both
// computed in one pass (accumulate), and goes to the log areas of the
// row's P and Q members (both, so one survives the loss of the other).
// When the row's previous record's partial parities are kept in memory
// (RowLog.Cached), a read-modify-write, or a reconstruct-write that read
// or rebuilt the old bytes of the write's own spans, adds those bytes to
// them instead of computing over all of W.
// Full-stripe rows record nothing, unless the row already has a record in
// the log's epoch. See raid/journal.go and the README.
//
// # Discards
//
// Whole rows are discarded on every member, P and Q included: a row of
// zeroes has zero P and zero Q. Partial rows are written as zeroes through
// the normal plans.
//
// # Rebuild and check
//
// Rebuild reconstructs one member's chunk of a row from the others; it
// works while one other member is missing too. RebuildMany (raid's
// MultiRebuilder) reconstructs two missing members' chunks together from
// one read of the rest of the row, so two members rebuild in one pass. Check verifies P and Q; with one member missing it rebuilds the
// missing chunk from the others and still verifies the parity left, so a
// row is unverifiable only with two members missing.
//
// # Scrub
//
// On a whole row a mismatch is located as md's raid6check does (locate in
// gf.go): byte by byte, with dP = P xor P' and dQ = Q xor Q' (P', Q'
// computed from the data read), only dP set means P is wrong, only dQ set
// means Q is wrong, and both set means data chunk z is wrong where
// dQ = 2^z · dP. Every differing byte must name the same chunk; a repair
// then rewrites that chunk (data corrected by dP, parity recomputed). When
// no single chunk explains the differences the row is reported unlocated
// and a repair recomputes P and Q from the data, as md's repair does. Note
// the blind spot every single-error locator has: the same bytes wrong at
// the same offsets of two data chunks cancel in P and look like a wrong Q.
package raid6
