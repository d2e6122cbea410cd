package main

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// The member commands ask a running raidd to change an array's members;
// the daemon opens new devices itself, with the same locking as serve.

func (c *cli) failCmd() *cobra.Command {
	return c.memberCmd("fail [--force] ARRAY MEMBER", "Mark a member of a running array failed",
		`Fail marks a member failed, as if it had returned an I/O error (mdadm
--fail). The array continues degraded; if it has a spare, the spare is
claimed and rebuilt onto at once. Name the member by path, member UUID or
role number. Failing a member that would leave the array FAILED (more
members missing than its level tolerates) needs --force. Afterwards,
'raidd add ARRAY PATH' re-adds the same device (only the regions written
since are resynced) and 'raidd remove' detaches it.`,
		"  raidd fail data /dev/sdc\n  raidd fail data 1",
		2, "fail it even if that leaves the array FAILED", func(a []string, force bool) (string, memberRequest) {
			return "fail", memberRequest{Member: memberID(a[1]), Force: force}
		})
}

func (c *cli) removeCmd() *cobra.Command {
	return c.memberCmd("remove ARRAY MEMBER", "Detach a failed or spare member from a running array",
		`Remove detaches a failed, spare or stale member from the array (mdadm
--remove) and closes its device, which can then be taken away. An active
member must be failed first with 'raidd fail'. A role number names the
member holding the role or, if none does, the failed member that held it.`,
		"  raidd remove data /dev/sdc\n  raidd remove data 1",
		2, "", func(a []string, _ bool) (string, memberRequest) {
			return "remove", memberRequest{Member: memberID(a[1])}
		})
}

func (c *cli) addCmd() *cobra.Command {
	return c.memberCmd("add [--force] ARRAY PATH", "Add a device to a running array as a spare",
		`Add opens PATH in the running raidd and adds it to the array (mdadm
--add). A former member of this array that failed, went stale or was
removed is re-added in its role when the write-intent bitmap has kept every
region written since it left: only those rows are resynced (md's re-add);
'raidd status' shows them as a re-add of N of M rows. Otherwise the device
becomes a spare; if the array is degraded it is claimed at once and rebuilt
from scratch, and the member-added event says why. A device that carries
another array's superblock is refused unless --force is given.`,
		"  raidd add data /dev/sde",
		2, forceTakeHelp, func(a []string, force bool) (string, memberRequest) {
			return "add", memberRequest{Path: absPath(a[1]), Force: force}
		})
}

func (c *cli) replaceCmd() *cobra.Command {
	return c.memberCmd("replace [--force] ARRAY OLD NEW", "Copy an active member onto a new device, then retire it",
		`Replace copies the active member OLD onto the device NEW while OLD keeps
serving (mdadm --replace), so the array never loses redundancy; when the
copy is done, NEW takes OLD's role and OLD leaves the array. Follow it with
'raidd status --watch'. --force takes a NEW that carries another array's
superblock.`,
		"  raidd replace data /dev/sdb /dev/sdf",
		3, forceTakeHelp, func(a []string, force bool) (string, memberRequest) {
			return "replace", memberRequest{Old: memberID(a[1]), New: absPath(a[2]), Force: force}
		})
}

const forceTakeHelp = "take a device that carries another array's raidd superblock"

// memberCmd builds one member command with n arguments, the first being
// the array name. forceHelp, if not empty, adds --force with that help.
func (c *cli) memberCmd(use, short, long, example string, n int, forceHelp string,
	build func(args []string, force bool) (string, memberRequest)) *cobra.Command {
	cmd := &cobra.Command{
		Use:     use,
		Short:   short,
		Long:    long + "\n\nThe running raidd is found through --control, RAIDD_CONTROL or the\nconfiguration file, like 'raidd status'.",
		Example: example,
		Args:    args(cobra.ExactArgs(n)),
	}
	keys := controlFlags(cmd)
	force := new(bool)
	if forceHelp != "" {
		force = cmd.Flags().Bool("force", false, forceHelp)
	}
	cmd.RunE = func(cmd *cobra.Command, a []string) error {
		cl, err := dialControl(cmd, keys)
		if err != nil {
			return err
		}
		op, req := build(a, *force)
		var reply memberReply
		if err := cl.doBody(cmd.Context(), "POST", "/v1/arrays/"+url.PathEscape(a[0])+"/"+op, req, &reply); err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, reply.Message)
		return nil
	}
	return cmd
}

// memberID turns a member named by a relative path into the absolute path
// the daemon knows it by. Role numbers and UUIDs are passed unchanged; so
// is a bare name that is no file here.
func memberID(id string) string {
	if _, err := strconv.Atoi(id); err == nil || filepath.IsAbs(id) {
		return id
	}
	if !strings.Contains(id, "/") {
		if _, err := os.Stat(id); err != nil {
			return id
		}
	}
	return absPath(id)
}

// absPath makes p absolute: the daemon runs in another directory.
func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
