package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

func (c *cli) createCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create --name NAME --level LEVEL [flags] MEMBER...",
		Short: "Write superblocks on members and form a new array",
		Long: `Create writes fresh raidd superblocks on the members, in role order, and
clears their data regions so that mirrors and parity agree from the start.
The array size follows from the smallest member, less the 1 MiB header.

Members that already carry a raidd superblock are refused unless --force is
given. With --size, member files that do not exist yet are created as
sparse files of that size.

Afterwards, add the array to the configuration of 'raidd serve'; create
prints a snippet to paste.`,
		Example: `  raidd create --name data --level 5 --chunk 64KiB /dev/sdb /dev/sdc /dev/sdd
  raidd create --name scratch --level 0 --size 10GiB /var/lib/raidd/a.img /var/lib/raidd/b.img`,
		Args: args(cobra.MinimumNArgs(1)),
	}
	fs := cmd.Flags()
	name := fs.String("name", "", "array `name`, recorded in the superblocks (required)")
	level := fs.String("level", "", "RAID `level`: 0, 1, 5 or 10 (required)")
	chunk := fs.String("chunk", "512KiB", "chunk `size`: a power of two from 4KiB to 64MiB")
	size := fs.String("size", "", "create missing member files as sparse files of this `size`")
	force := fs.Bool("force", false, "overwrite members that already carry a raidd superblock")
	keys := logFlags(fs)

	cmd.RunE = func(cmd *cobra.Command, paths []string) error {
		cfg, err := commandConfig(cmd, keys)
		if err != nil {
			return err
		}
		log, err := newLogger(c.stderr, cfg.Log)
		if err != nil {
			return err
		}
		co := raid.CreateOptions{Name: *name, Force: *force}
		var errs []error
		if *name == "" {
			errs = append(errs, errors.New("--name is required"))
		}
		if *level == "" {
			errs = append(errs, errors.New("--level is required"))
		} else if co.Level, err = stripe.ParseLevel(*level); err != nil {
			errs = append(errs, fmt.Errorf("--level: %w", err))
		}
		if co.Chunk, err = parseSize(*chunk); err != nil {
			errs = append(errs, fmt.Errorf("--chunk: %w", err))
		}
		var fileSize int64
		if *size != "" {
			if fileSize, err = parseSize(*size); err != nil {
				errs = append(errs, fmt.Errorf("--size: %w", err))
			}
		}
		for i, p := range paths {
			if paths[i], err = filepath.Abs(p); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			return usageError{errors.Join(errs...)}
		}
		if err := co.Validate(); err != nil {
			return usageError{err}
		}

		var devs []raid.Device
		closeAll := func() {
			for _, d := range devs {
				_ = d.Member.Close()
			}
		}
		for _, p := range paths {
			if fileSize > 0 {
				if _, err := os.Stat(p); errors.Is(err, os.ErrNotExist) {
					if err := member.CreateSparse(p, fileSize); err != nil {
						errs = append(errs, err)
						continue
					}
					log.Info("created member file", "path", p, "size", fileSize)
				}
			}
			m, err := openMember(p, false, false)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			devs = append(devs, raid.Device{Path: p, Member: m})
		}
		if len(errs) > 0 {
			closeAll()
			return errors.Join(errs...)
		}
		a, err := raid.Create(devs, co, raid.Options{Logger: log})
		if err != nil {
			closeAll()
			return err
		}
		st := a.Status()
		if err := a.Close(); err != nil {
			return fmt.Errorf("array %s was created but closing it failed: %w", co.Name, err)
		}
		fmt.Fprintf(c.stdout, "created %s array %q (uuid %s): %d members, chunk %s, size %s (%d bytes)\n",
			st.Level, st.Name, st.UUID, st.Members, formatSize(st.Chunk), formatSize(st.Size), st.Size)
		fmt.Fprintf(c.stdout, "\nAdd it to the arrays of raidd.yaml:\n\n  - name: %s\n    members:\n", strconv.Quote(st.Name))
		for _, p := range paths {
			fmt.Fprintf(c.stdout, "      - %s\n", strconv.Quote(p))
		}
		return nil
	}
	return cmd
}
