package main

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want int64
	}{
		{"0", 0},
		{"4096", 4096},
		{"4096B", 4096},
		{"64KiB", 64 << 10},
		{"64k", 64 << 10},
		{"64K", 64 << 10},
		{"64kB", 64000},
		{"1MiB", 1 << 20},
		{" 2 GiB ", 2 << 30},
		{"1.5GiB", 3 << 29},
		{"0.5k", 512},
		{"10GB", 10e9},
		{"3TiB", 3 << 40},
		{"9223372036854775807", 1<<63 - 1},
		{"7EiB", 7 << 60},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseSize(tt.in)
			if err != nil || got != tt.want {
				t.Fatalf("parseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestParseSizeRejects(t *testing.T) {
	for _, in := range []string{
		"", "KiB", "-1", "1.2.3", ".5K", "1 XB", "12Q", "1.1B", // not a whole byte
		"9223372036854775808",  // > MaxInt64
		"8388608TiB",           // 2^63 overflows
		"9223372036854775807K", // multiplication overflows
		"0.0000000000000000001K",
		"8EiB", // 2^63
	} {
		t.Run(in, func(t *testing.T) {
			if got, err := parseSize(in); !errors.Is(err, errSize) {
				t.Fatalf("parseSize(%q) = %d, %v; want an error wrapping errSize", in, got, err)
			}
		})
	}
}

func TestFormatSize(t *testing.T) {
	tests := []struct {
		in   int64
		want string
	}{
		{0, "0B"}, {1000, "1000B"}, {1024, "1KiB"}, {1536, "1.5KiB"},
		{512 << 10, "512KiB"}, {11280384, "10.8MiB"}, {126 << 20, "126MiB"},
		{1 << 62, "4EiB"}, {-5, "-5B"},
	}
	for _, tt := range tests {
		if got := formatSize(tt.in); got != tt.want {
			t.Errorf("formatSize(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzParseSize: parseSize never panics, never returns a negative size,
// and an exact formatSize result parses back to the same number.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"64KiB", "1.5GiB", "10GB", "9223372036854775807", "0.5k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := parseSize(s)
		if err != nil {
			return
		}
		if n < 0 {
			t.Fatalf("parseSize(%q) = %d", s, n)
		}
		if out := formatSize(n); !strings.Contains(out, ".") {
			if back, err := parseSize(out); err != nil || back != n {
				t.Fatalf("parseSize(formatSize(%d) = %q) = %d, %v", n, out, back, err)
			}
		}
	})
}
