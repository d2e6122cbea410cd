package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const modulePath = "github.com/raidd/raidd"

// goPackage is the part of `go list -json` output the lint needs.
type goPackage struct {
	ImportPath   string
	Standard     bool
	Imports      []string
	TestImports  []string
	XTestImports []string
	Deps         []string
	Error        *struct{ Err string }
}

// listPackages runs `go list -deps -json ./...` from the repository root and
// returns the module's own packages (with their transitive Deps) and the
// set of standard-library import paths among all dependencies.
func listPackages(t *testing.T) (own map[string]goPackage, std map[string]bool) {
	t.Helper()
	cmd := exec.Command("go", "list", "-e", "-deps", "-json", "./...")
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list: %s", stderr.String())
	own, std = map[string]goPackage{}, map[string]bool{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p goPackage
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		require.NoError(t, err)
		if p.Standard {
			std[p.ImportPath] = true
		}
		if p.ImportPath == modulePath || strings.HasPrefix(p.ImportPath, modulePath+"/") {
			own[p.ImportPath] = p
		}
	}
	return own, std
}

func rel(path string) string { return strings.TrimPrefix(strings.TrimPrefix(path, modulePath), "/") }

func hasPrefixAny(path string, prefixes ...string) bool {
	for _, p := range prefixes {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

// TestImportGraph enforces the import graph of ARCHITECTURE.md: the pure
// packages stay pure, the NBD server stays independent of the engine, only
// the command sees the CLI libraries, and only the parity levels (RAID5,
// RAID6) see reedsolomon.
func TestImportGraph(t *testing.T) {
	t.Parallel()
	own, std := listPackages(t)
	for _, p := range []string{"stripe", "raid", "raid/superblock", "raid/raid5", "nbd"} {
		require.Contains(t, own, modulePath+"/"+p, "package %s must exist for the lint to mean anything", p)
	}
	for path, p := range own {
		if p.Error != nil {
			t.Logf("go list reports a problem in %s: %s", rel(path), p.Error.Err)
		}
	}

	t.Run("stdlib-only", func(t *testing.T) {
		for _, p := range []string{"stripe", "raid/superblock"} {
			t.Run(strings.ReplaceAll(p, "/", "_"), func(t *testing.T) {
				pkg := own[modulePath+"/"+p]
				assert.NotEmpty(t, pkg.Deps, "go list must report dependencies")
				for _, d := range pkg.Deps {
					assert.True(t, std[d], "%s must import only the standard library, but depends on %s", p, d)
				}
			})
		}
	})

	t.Run("nbd-independent-of-engine", func(t *testing.T) {
		pkg := own[modulePath+"/nbd"]
		for _, d := range pkg.Deps {
			assert.False(t, hasPrefixAny(d, modulePath), "nbd must not import %s", d)
		}
	})

	cli := []string{"github.com/spf13/viper", "github.com/spf13/cobra", "github.com/spf13/pflag"}
	t.Run("cli-libraries-only-in-cmd", func(t *testing.T) {
		for path, pkg := range own {
			if path == modulePath+"/cmd/raidd" {
				continue
			}
			imports := append(append(append([]string{}, pkg.Deps...), pkg.TestImports...), pkg.XTestImports...)
			for _, d := range imports {
				assert.False(t, hasPrefixAny(d, cli...), "%s depends on %s; only cmd/raidd may", rel(path), d)
			}
		}
		if cmd, ok := own[modulePath+"/cmd/raidd"]; assert.True(t, ok, "cmd/raidd must exist") {
			// Sanity check of the lint itself: the command does see them.
			found := false
			for _, d := range cmd.Deps {
				found = found || hasPrefixAny(d, "github.com/spf13/viper")
			}
			assert.True(t, found, "cmd/raidd is expected to use viper (lint self-check)")
		}
	})

	t.Run("reedsolomon-only-in-parity-levels", func(t *testing.T) {
		const rs = "github.com/klauspost/reedsolomon"
		for path, pkg := range own {
			if !hasPrefixAny(path, modulePath+"/raid", modulePath+"/stripe", modulePath+"/nbd") ||
				path == modulePath+"/raid/raid5" || path == modulePath+"/raid/raid6" {
				continue
			}
			imports := append(append(append([]string{}, pkg.Deps...), pkg.TestImports...), pkg.XTestImports...)
			for _, d := range imports {
				assert.False(t, hasPrefixAny(d, rs), "%s depends on %s; only raid/raid5 and raid/raid6 may", rel(path), d)
			}
		}
	})
}
