package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/raidd/raidd/raid"
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
of its arrays and members, rebuild, replace and resync progress, the
write-intent bitmap, recent events and I/O counters. The control socket is
found from --control, RAIDD_CONTROL or the configuration file.

With --watch it redraws the status every --interval, with progress bars,
until interrupted (exit 0) or until raidd goes away (exit 4).

Exit status, as mdadm --detail --test: 0 when every array shown is clean
(or dirty, or resyncing: fully redundant); 1 when the worst is degraded;
2 when any array has failed or could not be assembled; 4 when the status
could not be read (raidd not running, bad configuration). A usage error
also exits 2.`,
		Example: `  raidd status
  raidd status --watch data
  raidd status --json | jq '.arrays[].state'`,
		Args: args(cobra.ArbitraryArgs),
	}
	keys := controlFlags(cmd)
	asJSON := cmd.Flags().Bool("json", false, "print the raw JSON status")
	watch := cmd.Flags().BoolP("watch", "w", false, "redraw the status every --interval until interrupted")
	interval := durationFlag(cmd.Flags(), "interval", time.Second, "redraw `interval` for --watch")
	runStatus := func(cmd *cobra.Command, names []string) error {
		if cmd.Flags().Changed("interval") && !*watch {
			return usageError{errors.New("--interval applies to --watch")}
		}
		if *interval <= 0 {
			return usageError{fmt.Errorf("--interval %v: must be positive", *interval)}
		}
		cl, err := dialControl(cmd, keys)
		if err != nil {
			return err
		}
		fetch := func(ctx context.Context) (*statusReply, error) {
			var st statusReply
			if err := cl.do(ctx, "GET", "/v1/status", &st); err != nil {
				return nil, err
			}
			var err error
			st.Arrays, err = selectArrays(st.Arrays, names)
			return &st, err
		}
		render := func(w io.Writer, st *statusReply) error {
			if *asJSON {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			printStatus(w, st, time.Now())
			return nil
		}
		if !*watch {
			st, err := fetch(cmd.Context())
			if err != nil {
				return err
			}
			if err := render(c.stdout, st); err != nil {
				return err
			}
			if code := worstState(st.Arrays); code != exitOK {
				return exitCodeError{code: code}
			}
			return nil
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return watchStatus(ctx, c.stdout, *interval, !*asJSON && isTerminal(c.stdout), fetch, render)
	}
	cmd.RunE = func(cmd *cobra.Command, names []string) error {
		return statusExit(runStatus(cmd, names))
	}
	return cmd
}

// statusExit gives every error of status that is not a usage error or an
// array state exitNoStatus.
func statusExit(err error) error {
	if err == nil || errors.As(err, new(usageError)) || errors.As(err, new(exitCodeError)) {
		return err
	}
	return exitCodeError{exitNoStatus, err}
}

// worstState returns the exit code of the worst array state in arrays:
// exitFailed, exitDegraded or exitOK.
func worstState(arrays []arrayStatus) int {
	code := exitOK
	for _, a := range arrays {
		switch {
		case a.Failed:
			return exitFailed
		case a.Degraded:
			code = exitDegraded
		}
	}
	return code
}

// watchStatus redraws the status every interval until ctx ends (nil) or
// the daemon cannot be reached (an error). clear clears the screen before
// each frame; otherwise frames are separated by a blank line.
func watchStatus(ctx context.Context, w io.Writer, interval time.Duration, clear bool,
	fetch func(context.Context) (*statusReply, error), render func(io.Writer, *statusReply) error) error {
	for frame := 0; ; frame++ {
		st, err := fetch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if frame > 0 {
				return fmt.Errorf("raidd went away: %w", err)
			}
			return err
		}
		var b bytes.Buffer
		switch {
		case clear:
			b.WriteString("\x1b[H\x1b[2J")
		case frame > 0:
			b.WriteString("\n")
		}
		if err := render(&b, st); err != nil {
			return err
		}
		if clear {
			fmt.Fprintf(&b, "\nEvery %v; Ctrl-C to stop.\n", interval)
		}
		if _, err := w.Write(b.Bytes()); err != nil {
			return err
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// progressWidth is the number of cells in a progress bar.
const progressWidth = 20

// progressBar renders a background job's progress:
// "[#########...........] 47.3%  112.4 MiB/s  ETA 0:12". The rate and the
// ETA are left out while unknown.
func progressBar(p *raid.Progress, width int) string {
	pct := p.Percent
	if math.IsNaN(pct) || pct < 0 {
		pct = 0
	}
	pct = min(pct, 100)
	filled := int(pct / 100 * float64(width))
	var b strings.Builder
	b.WriteByte('[')
	b.WriteString(strings.Repeat("#", filled))
	b.WriteString(strings.Repeat(".", width-filled))
	fmt.Fprintf(&b, "] %.1f%%", pct)
	if p.BytesPerSec > 0 {
		fmt.Fprintf(&b, "  %.1f MiB/s", p.BytesPerSec/(1<<20))
	}
	if p.ETASeconds > 0 {
		b.WriteString("  ETA " + formatETA(p.ETASeconds))
	}
	return b.String()
}

// formatETA renders seconds as m:ss, or h:mm:ss from an hour up, rounded up.
func formatETA(sec float64) string {
	s := int64(math.Ceil(sec))
	h, m, s := s/3600, s/60%60, s%60
	if h > 0 {
		return fmt.Sprintf("%d:%02d:%02d", h, m, s)
	}
	return fmt.Sprintf("%d:%02d", m, s)
}

// historyShown is how many recent events status prints per array.
const historyShown = 5

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
		if a.Error != "" {
			fmt.Fprintf(w, "\n%s: FAILED, not assembled, export %q not served\n", a.Name, a.Export)
			for _, line := range strings.Split(a.Error, "\n") {
				fmt.Fprintf(w, "  reason: %s\n", line)
			}
			continue
		}
		fmt.Fprintf(w, "\n%s: %s, %s, %s (%d bytes), chunk %s, export %q",
			a.Name, a.Level, strings.ToUpper(a.State), formatSize(a.Size), a.Size, formatSize(a.Chunk), a.Export)
		if a.ReadOnly {
			fmt.Fprint(w, ", read-only")
		}
		fmt.Fprintf(w, "\n  uuid %s, events %d\n", a.UUID, a.EventCount)
		if r := a.Recovery; r != nil {
			onto := r.Path
			if onto == "" {
				onto = "-"
			}
			fmt.Fprintf(w, "  recovery: %s of role %d onto %s  %s\n", r.Kind, r.Role, onto, progressBar(r, progressWidth))
		}
		if r := a.Resync; r != nil {
			fmt.Fprintf(w, "  resync: %s (%d of %d rows)\n", progressBar(r, progressWidth), r.Done, r.Total)
		}
		if sc := a.Scrub; sc != nil {
			fmt.Fprintf(w, "  scrub: %s  %s (%d of %d rows; %d mismatches, %d repaired)\n", sc.Kind, progressBar(&sc.Progress, progressWidth), sc.Done, sc.Total, sc.Mismatches, sc.Repaired)
		} else if sc := a.LastScrub; sc != nil {
			fmt.Fprintf(w, "  last scrub: %s finished %s: %s\n", sc.Kind, sc.Finished.Local().Format("2006-01-02 15:04:05"), sc.CheckResult)
		} else if !a.LastScrubFinished.IsZero() {
			fmt.Fprintf(w, "  last scrub: finished %s\n", a.LastScrubFinished.Local().Format("2006-01-02 15:04:05"))
		}
		if b := a.Bitmap; b != nil {
			fmt.Fprintf(w, "  bitmap: %s per bit, %d of %d regions dirty\n", formatSize(b.Region), b.Dirty, b.Regions)
		} else {
			if a.Level == "raid0" && a.Checksums == nil {
				fmt.Fprintln(w, "  bitmap: none (raid0 has no redundancy to resync after a crash)")
			} else {
				fmt.Fprintln(w, "  bitmap: none (a crash means a full resync)")
			}
		}
		if c := a.Checksums; c != nil {
			fmt.Fprintf(w, "  checksums: CRC32C per 4KiB block; %d repaired, %d lost, %d checksum pages rebuilt, %d resealed after a crash; cache %s of %s\n",
				c.Repaired, c.Lost, c.PagesRebuilt, c.Resealed, formatSize(c.CachedBytes), formatSize(c.CacheLimit))
		}
		if a.ConsistencyPolicy != "" {
			fmt.Fprintf(w, "  consistency policy: %s", a.ConsistencyPolicy)
			if j := a.Journal; j != nil {
				layout := "appended"
				if j.SlotBytes > 0 {
					layout = "in " + formatSize(j.SlotBytes) + " slots, members in memory"
				}
				fmt.Fprintf(w, " (write-hole journal: %s per member, records %s, %d partial-stripe rows recorded, %s written in %d log writes, %d checkpoints, %d records replayed at start)",
					formatSize(j.AreaBytes), layout, j.Records, formatSize(j.BytesWritten), j.LogWrites, j.Checkpoints, j.Replayed)
			}
			fmt.Fprintln(w)
		}
		s := a.Stats
		fmt.Fprintf(w, "  I/O: read %s, written %s, zeroed %s; members written %s, zero blocks punched %s (write amplification %.2f)\n",
			formatSize(s.ClientBytesRead), formatSize(s.ClientBytesWritten), formatSize(s.ClientBytesZeroed),
			formatSize(s.MemberBytesWritten), formatSize(s.MemberBytesElided), s.WriteAmplification)
		if s.RebuildBytesWritten+s.RebuildBytesDiscarded+s.ResyncBytesWritten+s.RepairBytesWritten > 0 {
			fmt.Fprintf(w, "  background: rebuilt %s (%s as holes), resynced %s, repaired %s\n",
				formatSize(s.RebuildBytesWritten), formatSize(s.RebuildBytesDiscarded),
				formatSize(s.ResyncBytesWritten), formatSize(s.RepairBytesWritten))
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  ROLE\tSTATE\tEVENTS\tPATH\tNOTE")
		for _, m := range a.Devices {
			role := fmt.Sprint(m.Role)
			if m.Role < 0 {
				role = "-"
			}
			path := m.Path
			if path == "" && m.UUID != "" {
				path = "uuid " + m.UUID // the name 'raidd remove' takes for it
			} else if path == "" {
				path = "-"
			}
			if m.WriteMostly {
				path += " (write-mostly)"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", role, m.State, m.Events, path, m.Note)
		}
		_ = tw.Flush()
		if h := a.History; len(h) > 0 {
			fmt.Fprintln(w, "  recent events:")
			for _, e := range h[max(0, len(h)-historyShown):] {
				fmt.Fprintf(w, "    %s  %s", e.Time.Local().Format("2006-01-02 15:04:05"), e.Kind)
				if e.Role >= 0 {
					fmt.Fprintf(w, "  role %d", e.Role)
				}
				if e.Path != "" {
					fmt.Fprintf(w, "  %s", e.Path)
				}
				if e.Detail != "" {
					fmt.Fprintf(w, "  (%s)", e.Detail)
				}
				fmt.Fprintln(w)
			}
		}
	}
}

func (c *cli) checkCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "check [--repair] [ARRAY...]",
		Short: "Scrub running arrays: verify mirrors and parity, and with --repair fix them",
		Long: `Check asks a running 'raidd serve' to scrub the named arrays (default:
all): read every row and verify that mirrors are identical and parity
matches the data, as md's check does. The scrub is a background job of the
array, at the rebuild rate limits (rebuild_min_rate, rebuild_max_rate),
with its progress and ETA in 'raidd status'; it is checkpointed in the
superblocks, so a restart of raidd resumes it. Rows that are holes on every
member are skipped. Check waits for it to end and reports the rows
verified, the mismatches (md's mismatch_cnt, in chunks) with the member and
offset of each, and the rows that could not be verified: a degraded array
has no redundancy left to compare in rows missing a member (RAID0 keeps
none), and is never reported consistent.

With --repair the scrub rewrites what is wrong: a mirror copy that differs
from the first readable copy (as md does: without checksums nothing tells
which copy is right, and the report says so); RAID5 parity, recomputed from
the data; on RAID6 the one chunk of a row (data, P or Q) that the P/Q
syndromes locate, or P and Q when no single chunk explains the mismatch.

It exits 1 if mismatches were found and not repaired, if rows could not be
verified, or if the check failed.`,
		Args: args(cobra.ArbitraryArgs),
	}
	keys := controlFlags(cmd)
	repair := cmd.Flags().Bool("repair", false, "rewrite what the scrub finds wrong")
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
			if err := cl.doBody(cmd.Context(), "POST", "/v1/arrays/"+url.PathEscape(n)+"/check", checkRequest{Repair: *repair}, &r); err != nil {
				fmt.Fprintf(c.stdout, "%s: check failed: %v\n", n, err)
				errs = append(errs, fmt.Errorf("%s: check failed", n))
				continue
			}
			verdict, err := checkVerdict(n, &r)
			fmt.Fprintf(c.stdout, "%s: %s (%.1fs): %s\n", n, verdict, r.Seconds, r.CheckResult)
			for _, f := range r.Findings {
				fmt.Fprintf(c.stdout, "  %s\n", f)
			}
			if more := r.Mismatches - int64(len(r.Findings)); more > 0 {
				fmt.Fprintf(c.stdout, "  ... and %d more mismatches\n", more)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	return cmd
}

// checkVerdict names the outcome of one array's check and returns the
// error that makes raidd check exit 1, if any: mismatches left unrepaired,
// or rows that could not be verified.
func checkVerdict(name string, r *checkReply) (string, error) {
	switch {
	case r.Consistent:
		return "consistent", nil
	case r.Inconsistent > r.RepairedRows:
		return "INCONSISTENT", fmt.Errorf("%s is inconsistent", name)
	case r.Unverifiable > 0 && r.Mismatches > 0:
		return "REPAIRED, NOT FULLY VERIFIED", fmt.Errorf("%s could not be fully verified", name)
	case r.Unverifiable > 0:
		return "NOT VERIFIED", fmt.Errorf("%s could not be fully verified", name)
	case r.Repair && r.Mismatches > 0 && r.Repaired == r.Mismatches:
		return "REPAIRED", nil
	}
	return "NOT CONSISTENT", fmt.Errorf("%s: %s", name, r.Error)
}
