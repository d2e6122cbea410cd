package main

import (
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/raidd/raidd/nbd"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// FuzzFlagValues feeds one arbitrary string to every parser of a single
// flag or configuration value (FuzzConfig reaches them only through YAML,
// and FuzzParseSize has sizes): none may panic; what a parser accepts must
// be what it claims (a listen address splits, a level, TLS mode, write-back
// mode, consistency policy or UUID formats back to the same value; the
// default consistency policy is named by the empty string), and a
// listen address it refuses is named in the error.
func FuzzFlagValues(f *testing.F) {
	for _, seed := range []string{
		"127.0.0.1:10809", "[::1]:10809", ":10809", "tcp://localhost:1", "unix:/run/raidd.sock",
		"unix://rel", "unix:", "/abs.sock", "ftp://x", "a b", "16MiB/s", " 1.5GiB /s", "raid5", "RAID10",
		"6", "require", "auto", "off", "ppl", "bitmap", "resync",
		"8b42e1f6-6c6b-4438-9721-570fc3101dfe", "8B42E1F66C6B44389721570FC3101DFE", "",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if network, addr, err := parseListen(s); err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", s)) {
				t.Fatalf("parseListen(%q): the error does not name the value: %v", s, err)
			}
		} else {
			switch network {
			case "unix":
				if addr == "" {
					t.Fatalf("parseListen(%q): unix with no path", s)
				}
			case "tcp":
				if _, _, err := net.SplitHostPort(addr); err != nil {
					t.Fatalf("parseListen(%q): tcp address %q does not split: %v", s, addr, err)
				}
				_ = isLoopback(addr)
			default:
				t.Fatalf("parseListen(%q): network %q", s, network)
			}
		}
		if r, err := parseRate(s); err == nil {
			if r < 0 {
				t.Fatalf("parseRate(%q) = %d", s, r)
			}
			if n, err := parseSize(s); err == nil && n != r {
				t.Fatalf("parseRate(%q) = %d, parseSize = %d", s, r, n)
			}
		}
		_, _ = parseLevel(s)
		if l, err := stripe.ParseLevel(s); err == nil {
			if back, err := stripe.ParseLevel(l.String()); err != nil || back != l {
				t.Fatalf("level %q -> %v -> %v, %v", s, l, back, err)
			}
		}
		if m, err := nbd.ParseTLSMode(s); err == nil {
			if back, err := nbd.ParseTLSMode(m.String()); err != nil || back != m {
				t.Fatalf("TLS mode %q -> %v -> %v, %v", s, m, back, err)
			}
		}
		if w, err := raid.ParseWriteBack(s); err == nil {
			if back, err := raid.ParseWriteBack(w.String()); err != nil || back != w {
				t.Fatalf("write-back %q -> %v -> %v, %v", s, w, back, err)
			}
		}
		if p, err := raid.ParseConsistencyPolicy(s); err == nil && p == raid.PolicyDefault {
			if s != "" {
				t.Fatalf("consistency policy %q is the default, which only \"\" names", s)
			}
		} else if err == nil {
			if back, err := raid.ParseConsistencyPolicy(p.String()); err != nil || back != p {
				t.Fatalf("consistency policy %q -> %v -> %v, %v", s, p, back, err)
			}
		}
		if u, err := superblock.ParseUUID(s); err == nil {
			if back, err := superblock.ParseUUID(superblock.FormatUUID(u)); err != nil || back != u {
				t.Fatalf("UUID %q -> %s -> %x, %v", s, superblock.FormatUUID(u), back, err)
			}
		}
	})
}
