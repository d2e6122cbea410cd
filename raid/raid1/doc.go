// Package raid1 registers the RAID1 personality: an N-way mirror (N ≥ 2)
// in which every member holds the whole array at the same offsets. It
// survives the loss of N-1 members. Reads are spread over the in-sync
// copies chunk by chunk and avoid write-mostly members; writes go to every
// writable member under the stripe locks, so mirrors never diverge. The
// implementation is shared with RAID10 (raid/internal/mirror); only the
// geometry differs.
package raid1
