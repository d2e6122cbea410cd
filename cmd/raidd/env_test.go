package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUnknownEnvironmentVariable(t *testing.T) {
	e := newEnv(t)
	t.Setenv("RAIDD_LISTN", "127.0.0.1:1")
	code, _, errOut := raidd(t, "status", "--control", e.control)
	assert.Equal(t, exitNoStatus, code)
	assert.Contains(t, errOut, "environment variable RAIDD_LISTN is not a raidd setting; did you mean RAIDD_LISTEN?")

	code, _, errOut = raidd(t, "serve", "--config", e.config(t, "", e.array("a", "", "a.img")))
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "RAIDD_LISTN")

	// Nothing near: the known settings are listed.
	require.NoError(t, os.Unsetenv("RAIDD_LISTN")) // t.Setenv restores it
	t.Setenv("RAIDD_FROBNICATOR_SETTING", "1")
	code, _, errOut = raidd(t, "create", "--name", "x", "--level", "1", e.paths("x.img")[0])
	assert.Equal(t, exitError, code)
	assert.Contains(t, errOut, "RAIDD_FROBNICATOR_SETTING is not a raidd setting (settings: ")
	assert.Contains(t, errOut, "RAIDD_LOG_LEVEL")
	assert.Contains(t, errOut, "RAIDD_NBD_MAX_PAYLOAD")
}

func TestCheckEnv(t *testing.T) {
	ok := append([]string{"PATH=/bin", "RAIDDX=1", "RAIDD_CONFIG=/etc/raidd.yaml", "RAIDD_EVENT=member-failed", "RAIDD_BIN=/x"}, "")
	for _, s := range envSettings() {
		ok = append(ok, s+"=1")
	}
	assert.NoError(t, checkEnv(ok), "every setting, the hook's variables and RAIDD_CONFIG are known")
	err := checkEnv([]string{"RAIDD_LOGLEVEL=debug", "RAIDD_CONTORL=/x"})
	assert.ErrorIs(t, err, errConfig)
	assert.ErrorContains(t, err, "RAIDD_LOGLEVEL is not a raidd setting; did you mean RAIDD_LOG_LEVEL?")
	assert.ErrorContains(t, err, "RAIDD_CONTORL is not a raidd setting; did you mean RAIDD_CONTROL?")
}

// TestCheckEnvSuggestsOnlySettings: the variables on_event sets for its
// command (RAIDD_ARRAY, ...) and those of the test scripts are ignored,
// since a hook may run raidd, but never offered for a misspelt setting.
func TestCheckEnvSuggestsOnlySettings(t *testing.T) {
	assert.NoError(t, checkEnv([]string{"RAIDD_ARRAY=data", "RAIDD_MEMBER=/dev/sdb", "RAIDD_SEED=1"}))
	err := checkEnv([]string{"RAIDD_ARRAYS=foo"})
	require.ErrorIs(t, err, errConfig)
	assert.NotContains(t, err.Error(), "did you mean")
	assert.ErrorContains(t, err, "RAIDD_ARRAYS is not a raidd setting (settings: ")
	for _, v := range []string{"RAIDD_EVENTS=x", "RAIDD_MEMBERS=x", "RAIDD_SEEDS=x", "RAIDD_BINS=x"} {
		assert.NotContains(t, checkEnv([]string{v}).Error(), "did you mean", v)
	}
	assert.ErrorContains(t, checkEnv([]string{"RAIDD_CONFG=/x"}), "did you mean RAIDD_CONFIG?")
}

func TestListenEnvironmentWithSpaces(t *testing.T) {
	t.Setenv("RAIDD_LISTEN", "/tmp/a.sock /tmp/b.sock,\t127.0.0.1:1")
	c, err := loadConfig(newViper(), "")
	require.NoError(t, err)
	assert.Equal(t, []string{"/tmp/a.sock", "/tmp/b.sock", "127.0.0.1:1"}, c.Listen, "a list, never one path with spaces")

	// A flag value with a space is refused, not taken as a path.
	_, _, err = parseListen("unix:/tmp/a b.sock")
	assert.ErrorContains(t, err, "contains white space")
}

func TestFormatVersion(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "4f4676a0c1d2"}, {Key: "vcs.time", Value: "2026-11-30T03:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	assert.Equal(t, "v1.2.0 (revision 4f4676a0c1d2, 2026-11-30T03:00:00Z, modified; go1.26.8)", formatVersion("dev", info))
	assert.True(t, strings.HasPrefix(formatVersion("v9", info), "v9 (revision 4f4676a0c1d2"), "-X main.version wins")
	assert.Equal(t, "(devel) (no VCS revision recorded; go1.26.8)", formatVersion("dev", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}))

	code, out, _ := raidd(t, "--version")
	assert.Equal(t, exitOK, code)
	assert.True(t, strings.HasPrefix(out, "raidd version "), out)
}

// TestEnvOfTestScripts: every RAIDD_ variable the test and bench scripts
// export, or a Go test reads with os.Getenv, reaches the raidd processes
// those tests start, so raidd must accept it. scripts/test.sh once exported
// RAIDD_REQUIRE_KERNEL, and every raidd the suite started refused it.
func TestEnvOfTestScripts(t *testing.T) {
	root := filepath.Join("..", "..")
	exported := regexp.MustCompile(`(?m)^\s*(?:export\s+)?(RAIDD_[A-Z0-9_]+)=`)
	getenv := regexp.MustCompile(`os\.(?:Getenv|LookupEnv)\("(RAIDD_[A-Z0-9_]+)"\)`)
	var names []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		var re *regexp.Regexp
		switch {
		case strings.HasSuffix(path, ".sh"):
			re = exported
		case strings.HasSuffix(path, "_test.go"):
			re = getenv
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			names = append(names, m[1]+"=1")
		}
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, names, "RAIDD_REQUIRE_KERNEL=1", "the walk must see scripts/test.sh")
	assert.NoError(t, checkEnv(names))
}
