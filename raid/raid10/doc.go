// Package raid10 registers the RAID10 personality in md's "near 2" layout:
// two copies of every chunk on adjacent members, for any member count of 2
// or more, odd counts included (then the two copies of some chunks sit in
// two adjacent rows). It survives the loss of one member of every copy set.
// The implementation is shared with RAID1 (raid/internal/mirror); only the
// geometry (stripe.Geometry.Copies) differs.
package raid10
