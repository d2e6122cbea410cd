package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
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
given. With --size, member (and spare) files that do not exist yet are
created as sparse files of that size. Spares (--spare) wait idle and are
claimed, and rebuilt onto, when a member fails.

The write-intent bitmap records which regions may have unfinished writes,
so that after a crash only those are resynced; --bitmap-region sets how
much of each member one bit covers (default 64MiB), and none disables it.

With --checksums every 4KiB block of every member's data region has a
CRC32C in a checksum area reserved on each member (4 bytes per block, plus
4 per 4KiB checksum page). Every read is verified; a block that fails is
served from the other copy or parity and rewritten, and counted in
'raidd status'. On RAID0 such a read fails with EIO. It is chosen here and
cannot be changed later.

RAID5 and RAID6 also keep a partial parity log (--consistency-policy ppl,
the default): before a partial-stripe write reaches data and parity, the
parity of the data it leaves alone is logged on the row's parity members,
so a crash while a member is missing, or one that leaves a member
missing, cannot corrupt data the write did not touch. It takes a log area
after the header on every member. --consistency-policy bitmap leaves the
hole open.

Afterwards, add the array to the configuration of 'raidd serve'; create
prints a snippet to paste.`,
		Example: `  raidd create --name data --level 5 --chunk 64KiB /dev/sdb /dev/sdc /dev/sdd
  raidd create --name scratch --level 0 --size 10GiB /var/lib/raidd/a.img /var/lib/raidd/b.img
  raidd create --name safe --level 5 --spare /dev/sdf /dev/sdb /dev/sdc /dev/sdd /dev/sde`,
		Args: args(cobra.MinimumNArgs(1)),
	}
	fs := cmd.Flags()
	name := fs.String("name", "", "array `name`, recorded in the superblocks (required)")
	level := fs.String("level", "", "RAID `level`: 0, 1, 5, 6 or 10 (required)")
	chunk := fs.String("chunk", "512KiB", "chunk `size`: a power of two from 4KiB to 64MiB")
	size := fs.String("size", "", "create missing member files as sparse files of this `size`")
	force := fs.Bool("force", false, "overwrite members that already carry a raidd superblock, and take over members whose holder cannot be proven dead")
	spares := fs.StringArray("spare", nil, "spare member `path` (repeatable)")
	bitmap := fs.String("bitmap-region", "", "write-intent bitmap `size` covered by one bit, or none (default 64MiB)")
	checksums := fs.Bool("checksums", false, "keep a CRC32C of every 4KiB block: reads are verified and bad blocks rewritten from redundancy (RAID0: the read fails)")
	policy := fs.String("consistency-policy", "", "`policy` across a crash: ppl (RAID5/6 default: a partial parity log closes the write hole) or bitmap")
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
		co := raid.CreateOptions{Name: *name, Force: *force, Checksums: *checksums}
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
		switch *bitmap {
		case "":
		case "none":
			co.BitmapRegion = -1
		default:
			if co.BitmapRegion, err = parseSize(*bitmap); err != nil {
				errs = append(errs, fmt.Errorf("--bitmap-region: %w", err))
			} else if co.BitmapRegion == 0 {
				errs = append(errs, errors.New("--bitmap-region: 0 is not a size; use none to disable the bitmap"))
			}
		}
		if co.ConsistencyPolicy, err = raid.ParseConsistencyPolicy(*policy); err != nil {
			errs = append(errs, fmt.Errorf("--consistency-policy: %w", err))
		}
		nMembers := len(paths)
		paths = append(paths, *spares...)
		seen := map[string]bool{}
		for i, p := range paths {
			if paths[i], err = filepath.Abs(p); err != nil {
				errs = append(errs, err)
			} else if seen[paths[i]] {
				errs = append(errs, fmt.Errorf("%s is given twice", paths[i]))
			}
			seen[paths[i]] = true
		}
		if len(errs) > 0 {
			return usageError{errors.Join(errs...)}
		}

		var (
			devs    []raid.Device
			created []string // member files this create made, removed if it fails
		)
		closeAll := func() {
			for _, d := range devs {
				_ = d.Member.Close()
			}
			for _, p := range created {
				if err := os.Remove(p); err != nil {
					log.Warn("cannot remove a member file this create made", "path", p, "err", err)
				} else {
					log.Info("removed member file", "path", p)
				}
			}
		}
		if err := co.Validate(); err != nil {
			return usageError{err}
		}
		if len(*spares) > 0 && co.Level == stripe.RAID0 {
			return usageError{errors.New("--spare: a raid0 array has no redundancy, so a spare could never be used")}
		}
		for _, p := range paths {
			if fileSize > 0 {
				made, err := member.EnsureSparse(p, fileSize)
				if err != nil {
					errs = append(errs, err)
					continue
				}
				if made {
					created = append(created, p)
					log.Info("created member file", "path", p, "size", fileSize)
				}
			}
			m, err := openMember(p, false, false, *force)
			if errors.Is(err, os.ErrNotExist) && fileSize == 0 {
				err = fmt.Errorf("%s: %w; --size SIZE creates missing member files as sparse files of that size", p, os.ErrNotExist)
			}
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
		co.Spares = devs[nMembers:]
		warnSizes(log, devs[:nMembers])
		a, err := raid.Create(devs[:nMembers], co, raid.Options{Logger: log})
		if err != nil {
			closeAll()
			if errors.Is(err, stripe.ErrTooSmall) {
				return tooSmall(devs[:nMembers], co)
			}
			return err
		}
		st := a.Status()
		if err := a.Close(); err != nil {
			return fmt.Errorf("array %s was created but closing it failed: %w", co.Name, err)
		}
		fmt.Fprintf(c.stdout, "created %s array %q (uuid %s): %d members, chunk %s, size %s (%d bytes)",
			st.Level, st.Name, st.UUID, st.Members, formatSize(st.Chunk), formatSize(st.Size), st.Size)
		if n := len(co.Spares); n > 0 {
			fmt.Fprintf(c.stdout, ", %d spare(s)", n)
		}
		fmt.Fprintln(c.stdout)
		fmt.Fprintf(c.stdout, "\nAdd it to the arrays of raidd.yaml:\n\n  - name: %s\n    members:\n", strconv.Quote(st.Name))
		for _, p := range paths {
			fmt.Fprintf(c.stdout, "      - %s\n", strconv.Quote(p))
		}
		return nil
	}
	return cmd
}

// sizeSpread is how much larger than the smallest member another member
// may be before create warns that the difference is wasted.
const sizeSpread = 0.10

// warnSizes warns when the members differ in size by more than sizeSpread:
// every member contributes only as much as the smallest one.
func warnSizes(log *slog.Logger, devs []raid.Device) {
	if len(devs) == 0 {
		return
	}
	small, large := devs[0], devs[0]
	var unused int64
	for _, d := range devs[1:] {
		if d.Member.Size() < small.Member.Size() {
			small = d
		}
		if d.Member.Size() > large.Member.Size() {
			large = d
		}
	}
	for _, d := range devs {
		unused += d.Member.Size() - small.Member.Size()
	}
	if float64(large.Member.Size()) <= float64(small.Member.Size())*(1+sizeSpread) {
		return
	}
	log.Warn(fmt.Sprintf("members differ in size by more than %.0f%%: each member is used only up to the size of the smallest, so %s stay unused",
		100*sizeSpread, formatSize(unused)),
		"smallest", small.Path, "smallest_size", formatSize(small.Member.Size()),
		"largest", large.Path, "largest_size", formatSize(large.Member.Size()))
}

// tooSmall explains a create refused because the smallest member cannot
// hold the header, the write-hole log area (RAID5 and RAID6 with the
// journal) and one chunk: the minimum size, and a chunk that fits.
func tooSmall(devs []raid.Device, co raid.CreateOptions) error {
	if co.Chunk == 0 {
		co.Chunk = stripe.DefaultChunk
	}
	small := devs[0]
	for _, d := range devs[1:] {
		if d.Member.Size() < small.Member.Size() {
			small = d
		}
	}
	size := small.Member.Size()
	// dataOff is where the data region starts with chunk c.
	dataOff := func(c int64) int64 {
		o := co
		o.Chunk = c
		if off, err := raid.CreateDataOffset(o, len(devs), size); err == nil {
			return off
		}
		return superblock.HeaderSize
	}
	chunk := co.Chunk
	need := dataOff(chunk) + chunk
	parts := "the " + formatSize(superblock.HeaderSize) + " header and one chunk"
	if l := dataOff(chunk) - superblock.HeaderSize; l > 0 {
		parts = fmt.Sprintf("the %s header, the %s write-hole log area and one chunk", formatSize(superblock.HeaderSize), formatSize(l))
	}
	msg := fmt.Sprintf("%s is %s (%d bytes); with chunk %s a member needs at least %s (%d bytes: %s)",
		small.Path, formatSize(size), size, formatSize(chunk), formatSize(need), need, parts)
	for c := chunk / 2; c >= stripe.MinChunk; c /= 2 {
		if dataOff(c)+c <= size {
			return fmt.Errorf("%w: %s; use a smaller chunk (--chunk %s) or larger members", stripe.ErrTooSmall, msg, formatSize(c))
		}
	}
	if dataOff(stripe.MinChunk) > superblock.HeaderSize {
		msg += fmt.Sprintf("; even the smallest chunk (%s) needs members of at least %d bytes: use larger members, or --consistency-policy bitmap (no log area, and no write-hole protection)",
			formatSize(stripe.MinChunk), dataOff(stripe.MinChunk)+stripe.MinChunk)
	} else {
		msg += fmt.Sprintf("; even the smallest chunk (%s) needs members of at least %d bytes (the %s header and %s): use larger members",
			formatSize(stripe.MinChunk), superblock.HeaderSize+stripe.MinChunk, formatSize(superblock.HeaderSize), formatSize(stripe.MinChunk))
	}
	return fmt.Errorf("%w: %s", stripe.ErrTooSmall, msg)
}
