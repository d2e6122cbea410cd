// Package crc32c computes the CRC32C (Castagnoli) of the 4 KiB blocks that
// package raid's per-block checksums cover, and copies bytes while it does.
//
// Sum is hash/crc32's Castagnoli checksum, bit for bit. Where the CPU has
// AVX-512 carry-less multiplies (VPCLMULQDQ on ZMM registers) it folds 256
// bytes at a time in four independent registers, the way the Intel white
// paper "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ"
// folds 64, and hands the last 16 bytes to the CRC32 instruction: a 4 KiB
// block in cache costs half what hash/crc32 (three interleaved CRC32
// instruction streams) does. Elsewhere Sum is hash/crc32.
//
// CopySums copies and checksums in one pass: each 256 bytes are loaded
// into registers once, stored to the destination and folded. A member held
// in memory (a tmpfs file mapped by package member) writes a checksummed
// array's blocks with it, so that the CRC costs the copy's loads instead of
// a second pass over bytes that are, by then, out of the first-level cache.
package crc32c
