// Package raid0 registers the RAID0 personality: chunks striped over N ≥ 2
// members with no redundancy. Array chunk c lives on member c mod N. Any
// member failure fails the array: reads and writes that need it return an
// error (never wrong data), and the failure is recorded in the superblocks.
package raid0
