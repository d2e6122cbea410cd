package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // the command failed (or raidd check found an inconsistency)
	exitUsage = 2 // bad flags or arguments
)

// Exit codes of raidd status (mdadm --detail --test's): the worst state of
// the arrays shown, or exitNoStatus when there is no status to judge.
const (
	exitDegraded = 1 // an array runs without full redundancy
	exitFailed   = 2 // an array has failed or could not be assembled
	exitNoStatus = 4 // the status could not be read (raidd not running, bad configuration)
)

// exitCodeError makes a command exit with code. An empty message prints
// nothing: the command has already said what there is to say.
type exitCodeError struct {
	code int
	err  error
}

func (e exitCodeError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

func (e exitCodeError) Unwrap() error { return e.err }

// usageError marks errors in the command line itself.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

func main() {
	c := &cli{stdout: os.Stdout, stderr: os.Stderr}
	os.Exit(c.run(context.Background(), os.Args[1:]))
}

// run executes one raidd command line and returns the process exit code.
func (c *cli) run(ctx context.Context, args []string) int {
	stderr := c.stderr
	root := c.rootCmd()
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	// A joined error has one problem per line; prefix each.
	if msg := err.Error(); msg != "" {
		for _, line := range strings.Split(msg, "\n") {
			fmt.Fprintf(stderr, "raidd: %s\n", line)
		}
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "Run 'raidd --help' for usage.\n")
		return exitUsage
	}
	var ce exitCodeError
	if errors.As(err, &ce) {
		return ce.code
	}
	return exitError
}

// cli carries what every command needs.
type cli struct {
	stdout, stderr io.Writer
	// onReady is called by serve once it listens; tests use it.
	onReady func()
}

func (c *cli) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "raidd",
		Short: "Software RAID 0/1/5/6/10 over files and block devices, exported over NBD",
		Long: `raidd combines regular files and block devices into RAID 0, 1, 5, 6 and
10 arrays and exports each array as a Network Block Device (NBD) export.

  raidd demo     create a RAID5 on sparse files and serve it, in one command
  raidd create   write superblocks and form a new array
  raidd serve    assemble arrays (configured, or given as members) and serve them over NBD
  raidd status   show the arrays of a running raidd (--watch for live progress)
  raidd check    verify mirrors and parity of a running array (--repair fixes)
  raidd fail, remove, add, replace
                 change the members of a running array
  raidd examine  print the superblock of member devices
  raidd assemble check that members form an array that starts (--force to
                 start one that would not)

Configuration for serve comes from a YAML file (--config), environment
variables with the RAIDD_ prefix (RAIDD_LOG_LEVEL=debug,
RAIDD_NBD_MAX_PAYLOAD=32MiB) and flags, flags winning. Unknown keys are
errors. Sizes accept units: 4096, 64KiB, 1MiB, 2GiB, 10GB.`,
		Version:       versionString(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args: func(_ *cobra.Command, a []string) error {
			if len(a) > 0 {
				return usageError{fmt.Errorf("unknown command %q", a[0])}
			}
			return usageError{errors.New("no command given")}
		},
		RunE: func(*cobra.Command, []string) error { return nil }, // not reached: Args always fails
	}
	root.SetOut(c.stdout)
	root.SetErr(c.stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(c.createCmd(), c.serveCmd(), c.demoCmd(), c.statusCmd(), c.checkCmd(), c.examineCmd(),
		c.failCmd(), c.removeCmd(), c.addCmd(), c.replaceCmd(), c.assembleCmd(), c.restoreHeaderCmd())
	return root
}

// args wraps a cobra argument validator so its errors count as usage errors.
func args(v cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := v(cmd, a); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// configFlags adds --config to fs.
func configFlags(fs *pflag.FlagSet) {
	fs.StringP("config", "c", "", "YAML configuration `file` (default $RAIDD_CONFIG)")
}

// logFlags adds --log-level and --log-format and returns their bindings.
func logFlags(fs *pflag.FlagSet) map[string]string {
	fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	fs.String("log-format", "text", "log `format`: text or json")
	return map[string]string{"log-level": "log.level", "log-format": "log.format"}
}

// newLogger builds the logger a configuration asks for. It writes to
// stderr, which journald collects under systemd.
func newLogger(w io.Writer, lc LogConfig) (*slog.Logger, error) {
	level, err := parseLevel(lc.Level)
	if err != nil {
		return nil, usageError{fmt.Errorf("log level: %w", err)}
	}
	opts := &slog.HandlerOptions{Level: level}
	switch lc.Format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, usageError{fmt.Errorf("log format %q is not text or json", lc.Format)}
}

// commandConfig loads the configuration of a command: defaults, then the
// file, the environment and cmd's flags bound by keys.
func commandConfig(cmd *cobra.Command, keys map[string]string) (*Config, error) {
	if err := checkEnv(os.Environ()); err != nil {
		return nil, err
	}
	v := newViper()
	if err := bindFlags(v, cmd.Flags(), keys); err != nil {
		return nil, err
	}
	cfg, err := loadConfig(v, configPath(cmd.Flags()))
	return cfg, flagValueError(cmd, keys, err)
}

// flagValueError turns a configuration error about a key that a flag on
// the command line set (keys maps flags to keys) into a usage error that
// names the flag: a bad flag value exits 2, as the README's exit codes
// say. The same bad value from the file or the environment stays a
// configuration error (exit 1).
func flagValueError(cmd *cobra.Command, keys map[string]string, err error) error {
	var pe policyError
	if err == nil || errors.As(err, &pe) {
		return err
	}
	msg := err.Error()
	for flag, key := range keys {
		if !cmd.Flags().Changed(flag) {
			continue
		}
		for _, form := range []string{"config: " + key + ":", "config: " + key + " (", ": " + key + ": "} {
			if strings.Contains(msg, form) {
				return usageError{fmt.Errorf("--%s: %w", flag, err)}
			}
		}
	}
	return err
}
