//go:build !race

package parity_test

const raceEnabled = false
