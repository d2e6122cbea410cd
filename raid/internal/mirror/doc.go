// Package mirror implements the mirrored personalities, RAID1 and RAID10.
// They differ only in geometry (stripe.Geometry.Copies says where the copies
// of a chunk are), so one implementation serves both; raid/raid1 and
// raid/raid10 register it for their levels.
//
// Reads go to one readable copy, spread over the copies by chunk index and
// avoiding write-mostly members. A read of several chunks is cut into one
// contiguous stretch per copy, so that each member serves back-to-back
// chunks, which the engine merges into one I/O; a copy that fails is marked failed and the
// read is served from another. Writes go to every writable copy (including
// a member being rebuilt); the Array holds the stripe locks, so two
// overlapping writes reach every copy in the same order and mirrors never
// diverge. A write succeeds while at least one copy of every chunk took it.
package mirror
