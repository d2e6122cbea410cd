package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// controlFlags adds --config and --control to cmd and returns the binding.
func controlFlags(cmd *cobra.Command) map[string]string {
	configFlags(cmd.Flags())
	cmd.Flags().String("control", defaultControl, "control socket `path` of the running raidd")
	return map[string]string{"control": "control"}
}

// dialControl loads the configuration of a client command and returns a
// client for the control socket it names.
func dialControl(cmd *cobra.Command, keys map[string]string) (*controlClient, error) {
	cfg, err := commandConfig(cmd, keys)
	if err != nil {
		return nil, err
	}
	if cfg.Control == "" {
		return nil, usageError{errors.New("the control socket is disabled in the configuration (control: \"\")")}
	}
	return newControlClient(cfg.Control), nil
}

func (c *cli) statusCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "status [ARRAY...]",
		Short: "Show the arrays of a running raidd",
		Long: `Status asks a running 'raidd serve' over its control socket for the state
of its arrays and members, resync progress and I/O counters. The control
socket is found from --control, RAIDD_CONTROL or the configuration file.`,
		Args: args(cobra.ArbitraryArgs),
	}
	keys := controlFlags(cmd)
	asJSON := cmd.Flags().Bool("json", false, "print the raw JSON status")
	cmd.RunE = func(cmd *cobra.Command, names []string) error {
		cl, err := dialControl(cmd, keys)
		if err != nil {
			return err
		}
		var st statusReply
		if err := cl.do(cmd.Context(), "GET", "/v1/status", &st); err != nil {
			return err
		}
		if st.Arrays, err = selectArrays(st.Arrays, names); err != nil {
			return err
		}
		if *asJSON {
			enc := json.NewEncoder(c.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(st)
		}
		printStatus(c.stdout, &st, time.Now())
		return nil
	}
	return cmd
}

// selectArrays keeps the arrays named in names, in that order; no names
// keeps all.
func selectArrays(all []arrayStatus, names []string) ([]arrayStatus, error) {
	if len(names) == 0 {
		return all, nil
	}
	var out []arrayStatus
	var errs []error
	for _, n := range names {
		found := false
		for _, a := range all {
			if a.Name == n {
				out, found = append(out, a), true
			}
		}
		if !found {
			errs = append(errs, fmt.Errorf("no array named %q is running", n))
		}
	}
	return out, errors.Join(errs...)
}

func printStatus(w io.Writer, st *statusReply, now time.Time) {
	fmt.Fprintf(w, "raidd %s (pid %d), up %s, NBD on %s\n", st.Version, st.PID,
		now.Sub(st.Started).Round(time.Second), strings.Join(st.Listen, ", "))
	n := st.NBD
	fmt.Fprintf(w, "NBD: %d active connection(s), %d total; %d reads, %d writes, %d flushes, %d error replies\n",
		n.ActiveConnections, n.Connections, n.Reads, n.Writes, n.Flushes, n.ErrorReplies)
	for _, a := range st.Arrays {
		fmt.Fprintf(w, "\n%s: %s, %s, %s (%d bytes), chunk %s, export %q",
			a.Name, a.Level, strings.ToUpper(a.State), formatSize(a.Size), a.Size, formatSize(a.Chunk), a.Export)
		if a.ReadOnly {
			fmt.Fprint(w, ", read-only")
		}
		fmt.Fprintf(w, "\n  uuid %s, events %d\n", a.UUID, a.EventCount)
		if r := a.Resync; r != nil {
			fmt.Fprintf(w, "  resync: %.1f%% (%d of %d rows)\n", r.Percent, r.Done, r.Total)
		}
		s := a.Stats
		fmt.Fprintf(w, "  I/O: read %s, written %s, zeroed %s; members written %s (write amplification %.2f)\n",
			formatSize(s.ClientBytesRead), formatSize(s.ClientBytesWritten), formatSize(s.ClientBytesZeroed),
			formatSize(s.MemberBytesWritten), s.WriteAmplification)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  ROLE\tSTATE\tEVENTS\tPATH\tNOTE")
		for _, m := range a.Devices {
			role := fmt.Sprint(m.Role)
			if m.Role < 0 {
				role = "-"
			}
			path := m.Path
			if path == "" {
				path = "-"
			}
			if m.WriteMostly {
				path += " (write-mostly)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", role, m.State, m.Events, path, m.Note)
		}
		_ = tw.Flush()
	}
}

func (c *cli) checkCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check [ARRAY...]",
		Short: "Verify mirrors and parity of running arrays",
		Long: `Check asks a running 'raidd serve' to read every stripe of the named arrays
(default: all) and verify that mirrors are identical and parity matches
the data. I/O continues while it runs; it takes as long as reading the
members once. It exits 1 if any array is inconsistent or the check failed.`,
		Args: args(cobra.ArbitraryArgs),
	}
	keys := controlFlags(cmd)
	cmd.RunE = func(cmd *cobra.Command, names []string) error {
		cl, err := dialControl(cmd, keys)
		if err != nil {
			return err
		}
		if len(names) == 0 {
			var st statusReply
			if err := cl.do(cmd.Context(), "GET", "/v1/status", &st); err != nil {
				return err
			}
			for _, a := range st.Arrays {
				names = append(names, a.Name)
			}
		}
		var errs []error
		for _, n := range names {
			var r checkReply
			if err := cl.do(cmd.Context(), "POST", "/v1/arrays/"+url.PathEscape(n)+"/check", &r); err != nil {
				fmt.Fprintf(c.stdout, "%s: check failed: %v\n", n, err)
				errs = append(errs, fmt.Errorf("%s: check failed", n))
				continue
			}
			if r.Consistent {
				fmt.Fprintf(c.stdout, "%s: consistent (%.1fs)\n", n, r.Seconds)
				continue
			}
			fmt.Fprintf(c.stdout, "%s: INCONSISTENT (%.1fs): %s\n", n, r.Seconds, r.Error)
			errs = append(errs, fmt.Errorf("%s is inconsistent", n))
		}
		return errors.Join(errs...)
	}
	return cmd
}
