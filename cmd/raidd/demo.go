package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// The demo array: a 4-member RAID5 with 512 KiB chunks on sparse files.
const (
	demoName    = "demo"
	demoMembers = 4
	demoChunk   = 512 << 10
	demoDir     = "raidd-demo"
	demoSize    = "1GiB"
)

func (c *cli) demoCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo [--dir DIR] [--listen ADDR] [--size SIZE] [--control PATH]",
		Short: "Create a RAID5 on sparse files and serve it over NBD, in one command",
		Long: `Demo creates a 4-member RAID5 array named "demo" (chunk 512KiB) on the sparse
files DIR/member0.img .. DIR/member3.img, or reuses it if the files already
hold it, and serves it exactly like 'raidd serve' until Ctrl-C. It prints
the NBD URI and commands to try. The control socket defaults to
DIR/control.sock, so no root-owned /run directory is needed, and the member
commands work against it:

  raidd status --watch --control DIR/control.sock
  raidd fail --control DIR/control.sock demo DIR/member1.img

--size only matters when the files are created. Delete DIR to start over.`,
		Example: `  raidd demo
  raidd demo --dir /tmp/d --size 256MiB --listen unix:/tmp/d/nbd.sock`,
		Args: args(cobra.NoArgs),
	}
	fs := cmd.Flags()
	dir := fs.String("dir", "./"+demoDir, "`directory` for the member files")
	size := fs.String("size", demoSize, "`size` of each member file when it is created")
	keys := listenFlags(fs)
	fs.Lookup("control").DefValue = "DIR/control.sock"
	fs.Lookup("control").Usage = "control socket `path` (\"\" disables it)"
	for k, v := range logFlags(fs) {
		keys[k] = v
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		memberSize, err := parseSize(*size)
		if err != nil {
			return usageError{fmt.Errorf("--size: %w", err)}
		}
		d, err := filepath.Abs(*dir)
		if err != nil {
			return err
		}
		// The configuration comes from the flags and the RAIDD_
		// environment, never from a file: the demo is self-contained.
		cfg, err := commandConfig(cmd, keys)
		if err != nil {
			return err
		}
		if !cmd.Flags().Changed("control") {
			cfg.Control = filepath.Join(d, "control.sock")
		} else if cfg.Control != "" {
			cfg.Control = absPath(cfg.Control)
		}
		ac := ArrayConfig{Name: demoName, Description: "raidd demo: RAID5 of 4 sparse files in " + d}
		for i := range demoMembers {
			ac.Members = append(ac.Members, MemberConfig{Path: filepath.Join(d, fmt.Sprintf("member%d.img", i))})
		}
		cfg.Arrays = []ArrayConfig{ac}
		if err := flagValueError(cmd, keys, cfg.Validate()); err != nil {
			return err
		}
		log, err := newLogger(c.stderr, cfg.Log)
		if err != nil {
			return err
		}
		found, err := prepareDemo(d, &cfg.Arrays[0], memberSize, log)
		if err != nil {
			return err
		}
		ctx, stop := signalContext(cmd.Context(), log)
		defer stop()
		return runServe(ctx, cfg, log, func(uris []string) {
			printDemo(c.stdout, found, d, cfg, uris)
			c.ready()
		})
	}
	return cmd
}

// prepareDemo creates the demo array on new sparse files of size bytes,
// or finds it on the files of an earlier run. It keeps in ac only the
// members that hold the array. It returns a sentence saying which.
func prepareDemo(dir string, ac *ArrayConfig, size int64, log *slog.Logger) (string, error) {
	var (
		uuid     string
		holders  []MemberConfig
		problems []error
		fresh    = true // no file carries a superblock
	)
	for _, m := range ac.Members {
		f, err := member.Open(m.Path, member.Options{ReadOnly: true})
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			problems = append(problems, err)
			fresh = false
			continue
		}
		sb, err := superblock.Read(f)
		_ = f.Close()
		switch {
		case errors.Is(err, superblock.ErrNoMagic):
			continue // created, but the array never was
		case err != nil:
			problems = append(problems, fmt.Errorf("%s: %w", m.Path, err))
		case sb.Name != demoName:
			problems = append(problems, fmt.Errorf("%s belongs to array %q, not %q", m.Path, sb.Name, demoName))
		case uuid != "" && superblock.FormatUUID(sb.ArrayUUID) != uuid:
			problems = append(problems, fmt.Errorf("%s belongs to another %q array (uuid %s, not %s)", m.Path, demoName, superblock.FormatUUID(sb.ArrayUUID), uuid))
		default:
			uuid = superblock.FormatUUID(sb.ArrayUUID)
			holders = append(holders, m)
		}
		fresh = false
	}
	if len(problems) > 0 {
		return "", fmt.Errorf("%s holds files that are not the demo array; remove the directory or use another --dir:\n%w", dir, errors.Join(problems...))
	}
	if !fresh {
		if len(holders) < len(ac.Members) {
			log.Warn("some demo member files are missing or blank; the array starts degraded if it can ('raidd add' restores redundancy)",
				"found", len(holders), "of", len(ac.Members))
		}
		ac.Members = holders
		return fmt.Sprintf("Reusing the demo array (uuid %s) in %s.", uuid, dir), nil
	}

	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	var devs []raid.Device
	closeAll := func() {
		for _, d := range devs {
			_ = d.Member.Close()
		}
	}
	for _, m := range ac.Members {
		if err := member.CreateSparse(m.Path, size); err != nil {
			closeAll()
			return "", err
		}
		f, err := openMember(m.Path, false, false, false)
		if err != nil {
			closeAll()
			return "", err
		}
		devs = append(devs, raid.Device{Path: m.Path, Member: f})
	}
	a, err := raid.Create(devs, raid.CreateOptions{Name: demoName, Level: stripe.RAID5, Chunk: demoChunk}, raid.Options{Logger: log})
	if err != nil {
		closeAll()
		return "", err
	}
	st := a.Status()
	if err := a.Close(); err != nil {
		return "", fmt.Errorf("the demo array was created but closing it failed: %w", err)
	}
	return fmt.Sprintf("Created the demo array (uuid %s): RAID5 of %d sparse files of %s in %s, %s usable.",
		st.UUID, demoMembers, formatSize(size), dir, formatSize(st.Size)), nil
}

// printDemo tells the user what runs and what to try.
func printDemo(w io.Writer, found, dir string, cfg *Config, uris []string) {
	fmt.Fprintln(w, found)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Serving it over NBD:")
	for _, u := range uris {
		fmt.Fprintf(w, "  %s\n", u)
	}
	if len(uris) == 0 {
		return
	}
	u := uris[0]
	fmt.Fprintf(w, `
Try, from another terminal:
  nbdinfo %[1]s
  nbdcopy disk.img %[1]s          # write an image onto the array
  nbdcopy %[1]s copy.img          # and read it back
  qemu-img info %[1]s
`, shellQuote(u))
	if cfg.Control != "" {
		ctl := shellQuote(cfg.Control)
		m1 := shellQuote(filepath.Join(dir, "member1.img"))
		fmt.Fprintf(w, `  raidd status --watch --control %[1]s
  raidd fail --control %[1]s demo %[2]s     # lose a member: the array runs degraded
  raidd remove --control %[1]s demo %[2]s
  raidd add --control %[1]s demo %[2]s      # add it back: it is rebuilt
`, ctl, m1)
	}
	fmt.Fprintln(w, "\nPress Ctrl-C to stop; the array is synced and marked clean.")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@%+,", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
