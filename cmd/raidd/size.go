package main

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
)

// errSize is wrapped by every parseSize failure.
var errSize = errors.New("invalid size")

// sizeUnits maps a suffix (lower case) to its multiplier. The IEC suffixes
// and the bare letters are powers of 1024, as in mdadm, dd and systemd; the
// SI suffixes with a B ("kB", "MB") are powers of 1000.
var sizeUnits = map[string]int64{
	"": 1, "b": 1,
	"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
	"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
	"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
	"t": 1 << 40, "tib": 1 << 40, "tb": 1e12,
	"p": 1 << 50, "pib": 1 << 50, "pb": 1e15,
	"e": 1 << 60, "eib": 1 << 60, "eb": 1e18,
}

// parseSize parses a byte count such as "4096", "64KiB", "64k", "1.5GiB" or
// "10GB". The result must be a whole, non-negative number of bytes that fits
// in an int64.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i < 0 {
		i = len(t)
	}
	num, unit := t[:i], strings.ToLower(strings.TrimSpace(t[i:]))
	mult, ok := sizeUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("%w %q: want a number of bytes with an optional unit (KiB, MiB, GiB, TiB, or kB, MB, GB, TB)", errSize, s)
	}
	whole, frac, hasFrac := strings.Cut(num, ".")
	if whole == "" || strings.Contains(frac, ".") {
		return 0, fmt.Errorf("%w %q: malformed number", errSize, s)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w %q: too large", errSize, s)
	}
	hi, n := bits.Mul64(uint64(w), uint64(mult))
	if hi != 0 || n > math.MaxInt64 {
		return 0, fmt.Errorf("%w %q: too large", errSize, s)
	}
	if !hasFrac {
		return int64(n), nil
	}
	// A fraction is exact only if frac×mult is a whole number of bytes.
	var f, scale int64 = 0, 1
	for _, c := range frac {
		if scale > math.MaxInt64/10/mult {
			return 0, fmt.Errorf("%w %q: too many decimals", errSize, s)
		}
		f, scale = f*10+int64(c-'0'), scale*10
	}
	if f*mult%scale != 0 {
		return 0, fmt.Errorf("%w %q: not a whole number of bytes", errSize, s)
	}
	total := int64(n) + f*mult/scale
	if total < 0 {
		return 0, fmt.Errorf("%w %q: too large", errSize, s)
	}
	return total, nil
}

// formatSize renders n bytes for people: with the largest IEC unit not
// above n, exactly when n is a whole number of that unit, else with one
// decimal: "512KiB", "10.8MiB", "1000B".
func formatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i := 0
	for n > 0 && i < len(units)-1 && n>>(10*(i+1)) != 0 {
		i++
	}
	if i == 0 || n%(1<<(10*i)) == 0 {
		return strconv.FormatInt(n>>(10*i), 10) + units[i]
	}
	return strconv.FormatFloat(float64(n)/float64(int64(1)<<(10*i)), 'f', 1, 64) + units[i]
}
