// Package stripe is raidd's pure geometry: given a RAID level, a member count,
// a chunk size and the size of each member's data region, it says which
// member and which member offset hold any byte range of the array, which
// member holds parity for a stripe, and which array bytes a member offset
// stores. It does no I/O and starts no goroutines. It also provides the
// striped lock table the engine uses to serialize work on a stripe.
//
// # Words
//
//   - chunk: the bytes written to one member before moving to the next (md's
//     "chunk", the CLI's "stripe size"). A power of two from 4 KiB to 64 MiB;
//     512 KiB by default, as in mdadm.
//   - member: one backing file or block device. Its data region is the part
//     after the metadata header; offsets in this package are data-region
//     offsets.
//   - row: chunk-sized slice r of every member, member offsets
//     [r*chunk, (r+1)*chunk).
//   - stripe: the unit the engine locks. For RAID0, RAID5 and RAID6 it is a row (one
//     chunk on every member at the same member offset). For RAID1 it is one
//     chunk-sized range of the array. For RAID10 it is one array chunk, whose
//     two copies may sit in two adjacent rows when the member count is odd.
//   - stripe width: chunk × data members, the array bytes in one row.
//
// # Layouts
//
//   - RAID0: array chunk c lives on member c mod n, row c div n.
//   - RAID1: every member holds the whole array at the same offsets.
//   - RAID5: md's default left-symmetric layout. In row r the parity is on
//     member n-1 - (r mod n); data chunk i of the row is on member
//     (parity + 1 + i) mod n, so consecutive chunks walk across the members.
//   - RAID6: md's default left-symmetric layout for level 6
//     (ALGORITHM_LEFT_SYMMETRIC): in row r P is on member n-1 - (r mod n), Q
//     on the member after it, (P + 1) mod n, and data chunk i on member
//     (P + 2 + i) mod n. Data index i is also the chunk's slot in md's
//     syndrome: Q = sum of 2^i · D_i over GF(2^8).
//   - RAID10: md's "near 2" layout. Copy k (k = 0, 1) of array chunk c sits in
//     slot s = 2c + k of the member×row grid numbered row-major: member s mod n,
//     row s div n. With an odd member count the two copies of some chunks
//     straddle two rows, exactly as in md.
//
// Every level is one entry of the level table in levels.go: a striped
// level gives its parity chunks per row (RAID0 none, RAID5 one, RAID6 two,
// rotating left-symmetric), a mirrored level its copies per chunk in the near layout
// (RAID1 one per member, RAID10 two). Geometry methods branch on those two
// families, never on the level, so a level of an existing family is one
// table entry.
//
// # Invariants
//
// A Geometry is immutable and only built by New, which validates it. The
// extents that Extents produces tile the requested range exactly, in order,
// each inside one chunk and inside the member's data region; Locate inverts
// the mapping.
package stripe
