//go:build !amd64 || purego

package member

func prefetch(p, n uintptr) {}
