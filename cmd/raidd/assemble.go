package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/raidd/raidd/raid"
)

func (c *cli) assembleCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "assemble [--force [--accept-loss]] MEMBER...",
		Short: "Check that members form an array that starts; with --force, make it start",
		Long: `Assemble reads the superblocks of the MEMBERs, applies the same rules as
serve, prints which members the array would use and its state, and stops.
Without --force nothing is written: it says whether 'raidd serve' would
start the array, and why not.

With --force it performs a forced assembly (mdadm --assemble --force) and
writes the result to the superblocks, so that the next 'raidd serve'
starts the array. Use it when an array lost more members than it tolerates
because of an operator mistake (two 'raidd fail's on a RAID5) or a
transient fault (a RAID0 member error recorded by an older raidd): it
trusts the left-out members whose own superblock says they were in sync,
freshest event counter first, only as many as the start needs, and logs
each with its event counter. It refuses when the members' histories
diverged (split brain), when the needed members left at different times,
since the earlier one missed writes, and when a member that was in sync at
the newest event is merely not given (supply it; --accept-loss, only for a
member lost for good, starts without it and loses the writes it alone
holds). After it, parity and mirrors are
resynced over the write-intent bitmap's dirty regions when served.
'raidd serve --force-assemble' does the same at start.`,
		Example: "  raidd assemble /srv/a.img /srv/b.img /srv/c.img /srv/d.img\n  raidd assemble --force /srv/a.img /srv/b.img /srv/c.img /srv/d.img",
		Args:    args(cobra.MinimumNArgs(1)),
	}
	force := cmd.Flags().Bool("force", false, "start it even if it lost more members than it tolerates, trusting the freshest members that left, and write that to the superblocks")
	acceptLoss := cmd.Flags().Bool("accept-loss", false, "with --force: start it even though a member that was in sync is not given (lost for good), losing the writes the trusted members missed")
	cmd.RunE = func(_ *cobra.Command, paths []string) error {
		if *acceptLoss && !*force {
			return usageError{errors.New("--accept-loss only applies with --force")}
		}
		log := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
		var (
			devs []raid.Device
			errs []error
		)
		for _, p := range paths {
			abs, err := filepath.Abs(p)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			m, err := openMember(abs, !*force, false, false)
			if errors.Is(err, os.ErrNotExist) {
				// serve's rule (assembleArray): a member that is gone is
				// missing, which the level may tolerate.
				log.Warn("member not found; assembling without it", "path", abs, "err", err)
				continue
			}
			if err != nil {
				errs = append(errs, err)
				continue
			}
			devs = append(devs, raid.Device{Path: abs, Member: m})
		}
		if len(devs) == 0 && len(errs) == 0 {
			return errors.New("none of the members exists: give the paths of the array's members")
		}
		if len(errs) > 0 {
			for _, d := range devs {
				_ = d.Member.Close()
			}
			return errors.Join(errs...)
		}
		a, err := raid.Assemble(devs, raid.Options{ReadOnly: !*force, ForceAssemble: *force, AcceptLoss: *acceptLoss, Logger: log, CleanDelay: -1})
		if err != nil {
			for _, d := range devs {
				_ = d.Member.Close()
			}
			return err
		}
		st := a.Status()
		fmt.Fprintf(c.stdout, "%s: %s, %s, %d members, events %d\n", st.Name, st.Level, st.State, st.Members, st.EventCount)
		for _, m := range st.Devices {
			fmt.Fprintf(c.stdout, "  role %-3d %-10s events %-6d %s %s\n", m.Role, m.State, m.Events, m.Path, m.Note)
		}
		// Close makes the result durable; a resync it could not finish
		// leaves the array dirty, so that serve runs it.
		if err := a.Close(); err != nil {
			return err
		}
		if *force {
			fmt.Fprintf(c.stdout, "%s: superblocks written; start it with 'raidd serve'\n", st.Name)
		} else {
			fmt.Fprintf(c.stdout, "%s: would start; nothing written\n", st.Name)
		}
		return nil
	}
	return cmd
}
