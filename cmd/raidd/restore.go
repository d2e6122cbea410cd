package main

import (
	"fmt"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/stripe"
)

func (c *cli) restoreHeaderCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "restore-header [--role N] [--force] DEVICE MEMBER...",
		Short: "Rewrite a member's wiped or damaged header from the array's other members",
		Long: `Restore-header writes a superblock onto DEVICE, a member of an array whose
header (both superblock slots) was wiped or damaged while its data stayed
intact, taking every parameter from the superblocks of the MEMBERs, the
array's other members. Use it when the array cannot start without DEVICE:
RAID0, or more members than the level tolerates. md's way is to recreate
the array over the same disks with exactly the original parameters
('mdadm --create --assume-clean'); this writes DEVICE's header alone.

The member DEVICE was comes from what its damaged header still says (the
array and member UUIDs survive a partial overwrite or a flipped bit) or,
for a wiped header, from --role; a role given must agree with the header.
It refuses when DEVICE's header reads, when that member is given among the
MEMBERs, when the array's newest superblock does not record it as in sync
(a failed or rebuilding member missed writes: rebuild it with 'raidd
add'), and when DEVICE's damaged header is newer than the MEMBERs (they are
behind it). Give every other member of the array: without --force it
refuses when an in-sync member is missing, and when the MEMBERs alone start
the array (then leave DEVICE out and add it back, which rebuilds it and
trusts nothing on it). --force with --role also takes a header whose
identity is garbled for DEVICE's.

Nothing is written but DEVICE's superblock slots and write-intent bitmap.
Stop the array first: members in use by 'raidd serve' are refused. Then
start the array; on a level with redundancy run 'raidd check'.`,
		Example: "  raidd restore-header /srv/b.img /srv/a.img /srv/c.img /srv/d.img\n  raidd restore-header --role 1 /dev/sdc /dev/sdb /dev/sdd",
		Args:    args(cobra.MinimumNArgs(2)),
	}
	role := cmd.Flags().Int("role", -1, "the role DEVICE held, when its header no longer says (wiped)")
	force := cmd.Flags().Bool("force", false, "restore even though the other members start the array without DEVICE")
	cmd.RunE = func(cc *cobra.Command, paths []string) error {
		if cc.Flags().Changed("role") && *role < 0 {
			return usageError{fmt.Errorf("--role %d: a role is 0 or more", *role)}
		}
		var devs []raid.Device
		defer func() {
			for _, d := range devs {
				_ = d.Member.Close()
			}
		}()
		for i, p := range paths {
			abs, err := filepath.Abs(p)
			if err != nil {
				return err
			}
			m, err := openMember(abs, i > 0, false, false)
			if err != nil {
				return err
			}
			devs = append(devs, raid.Device{Path: abs, Member: m})
		}
		m, err := raid.RestoreHeader(devs[0], devs[1:], raid.RestoreOptions{Role: *role, Force: *force})
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "%s: header restored as role %d of %q (%s, events %d)\n", devs[0].Path, m.Role, m.Name, stripe.Level(m.Level), m.Events)
		if m.Level == 0 {
			fmt.Fprintf(c.stdout, "RAID0 keeps no redundancy, so nothing can check that %s holds role %d's data: check the file system on the array (read-only) before writing to it\n", devs[0].Path, m.Role)
		} else {
			fmt.Fprintf(c.stdout, "start the array, then run 'raidd check %s': it compares %s's data with the others'\n", m.Name, devs[0].Path)
		}
		return nil
	}
	return cmd
}
