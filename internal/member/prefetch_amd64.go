//go:build !purego

package member

// prefetch asks the CPU to load the first line of each page of [p, p+n)
// into the cache (prefetch_amd64.s). It never faults, whatever p is.
//
//go:noescape
func prefetch(p, n uintptr)
