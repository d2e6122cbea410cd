package main

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// envPrefix starts every environment variable raidd reads.
const envPrefix = "RAIDD_"

// envConfig names the configuration file: read, though not a setting.
const envConfig = "RAIDD_CONFIG"

// envOther lists the RAIDD_ variables that raidd does not read but that
// may legitimately be in its environment: those on_event sets for its
// command (which may run raidd status), and those of the test and bench
// scripts (tests/, bench/), which run raidd. They are ignored, and never
// suggested for a misspelt variable: RAIDD_ARRAYS is no typo of the hook's
// RAIDD_ARRAY.
var envOther = []string{
	"RAIDD_EVENT", "RAIDD_ARRAY", "RAIDD_ROLE", "RAIDD_MEMBER", "RAIDD_DETAIL", "RAIDD_TIME",
	"RAIDD_BIN", "RAIDD_TEST_RACE", "RAIDD_REQUIRE_KERNEL", "RAIDD_SEED", "RAIDD_WRITE_HOLE_POLICY",
}

// envSettings returns the environment variable of every scalar setting:
// nbd.max_payload is RAIDD_NBD_MAX_PAYLOAD.
func envSettings() []string {
	var out []string
	for k := range scalarDefaults {
		out = append(out, envPrefix+strings.ToUpper(strings.ReplaceAll(k, ".", "_")))
	}
	sort.Strings(out)
	return out
}

// checkEnv reports every RAIDD_ variable of environ (os.Environ's form)
// that raidd does not know, with the nearest variable raidd reads, or the
// list of settings when none is near: a misspelt variable would otherwise be
// ignored without a word.
func checkEnv(environ []string) error {
	settings := envSettings()
	read := append(slices.Clone(settings), envConfig)
	known := slices.Concat(read, envOther)
	stems := make([]string, len(read))
	for i, k := range read {
		stems[i] = strings.TrimPrefix(k, envPrefix)
	}
	var bad []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || slices.Contains(known, name) {
			continue
		}
		msg := fmt.Sprintf("environment variable %s is not a raidd setting", name)
		if near := nearest(strings.TrimPrefix(name, envPrefix), stems); near != "" {
			msg += fmt.Sprintf("; did you mean %s%s?", envPrefix, near)
		} else {
			msg += fmt.Sprintf(" (settings: %s; also read: %s)", strings.Join(settings, ", "), envConfig)
		}
		bad = append(bad, msg)
	}
	if len(bad) == 0 {
		return nil
	}
	sort.Strings(bad)
	return fmt.Errorf("%w: %s", errConfig, strings.Join(bad, "\n"))
}

// nearest returns the name of known closest to name by edit distance, if
// it is close enough to be a likely typo: at most a third of its length,
// plus one. Environment variables are compared without RAIDD_, and
// configuration keys with known holding the keys at the same level.
func nearest(name string, known []string) string {
	best, bestD := "", -1
	for _, k := range known {
		if d := editDistance(name, k); bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	if bestD < 0 || bestD > len(name)/3+1 {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
