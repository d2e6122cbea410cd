package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/raid"
	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// examined is the JSON form of one member's superblock.
type examined struct {
	Path        string `json:"path"`
	Error       string `json:"error,omitempty"`
	ArrayUUID   string `json:"array_uuid,omitempty"`
	Name        string `json:"name,omitempty"`
	Level       string `json:"level,omitempty"`
	Chunk       uint64 `json:"chunk,omitempty"`
	RaidMembers uint32 `json:"raid_members,omitempty"`
	Role        int32  `json:"role"`
	MemberUUID  string `json:"member_uuid,omitempty"`
	// Removed: the member's own table records it as removed (a device
	// retired by a replace gets the table that retired it).
	Removed           bool   `json:"removed,omitempty"`
	DataOffset        uint64 `json:"data_offset,omitempty"`
	DataSize          uint64 `json:"data_size,omitempty"`
	ConsistencyPolicy string `json:"consistency_policy,omitempty"`
	LogOffset         uint64 `json:"log_offset,omitempty"`
	LogLength         uint64 `json:"log_length,omitempty"`
	// Checksums is the per-block checksum area, when the array has one.
	Checksums         *examinedChecksums `json:"checksums,omitempty"`
	Events            uint64             `json:"events"`
	State             string             `json:"state,omitempty"`
	RebuildRole       int32              `json:"rebuild_role"`
	RebuildCheckpoint uint64             `json:"rebuild_checkpoint"`
	// Scrub is what the superblock records about scrubs (raidd check):
	// nil when the array was never scrubbed.
	Scrub   *examinedScrub  `json:"scrub,omitempty"`
	Created time.Time       `json:"created"`
	Updated time.Time       `json:"updated"`
	Members []examinedEntry `json:"members,omitempty"`
	// InUse is the holder its in-use block names, if any: a raidd that has
	// the member open for writing (or had, if it died without letting go).
	InUse *examinedHolder `json:"in_use,omitempty"`
}

// examinedScrub decodes the superblock's scrub field: either a scrub in
// progress when the superblock was written (interrupted, unless a raidd
// still runs it), with the row it resumes at, or the time the last scrub
// finished.
type examinedScrub struct {
	Running bool `json:"running"`
	// Kind is "check" or "repair" (raidd check --repair), for a scrub in
	// progress.
	Kind string `json:"kind,omitempty"`
	// ResumeRow is the row the scrub in progress resumes at, of Rows.
	ResumeRow uint64 `json:"resume_row"`
	Rows      uint64 `json:"rows"`
	// LastFinished is when the last scrub finished (none in progress).
	LastFinished time.Time `json:"last_finished,omitzero"`
}

func examineScrub(m *superblock.Meta) *examinedScrub {
	if m.Scrub == 0 {
		return nil
	}
	s := &examinedScrub{}
	if m.ChunkSize != 0 {
		s.Rows = m.DataSize / m.ChunkSize
	}
	if m.Scrub&superblock.ScrubRunning == 0 {
		s.LastFinished = time.Unix(int64(m.Scrub), 0).UTC()
		return s
	}
	s.Running, s.Kind, s.ResumeRow = true, "check", m.Scrub&superblock.ScrubRowMask
	if m.Scrub&superblock.ScrubRepair != 0 {
		s.Kind = "repair"
	}
	return s
}

type examinedChecksums struct {
	Offset uint64 `json:"offset"`
	Length uint64 `json:"length"`
}

type examinedHolder struct {
	Host      string    `json:"host"`
	PID       uint32    `json:"pid"`
	Path      string    `json:"path"`
	Since     time.Time `json:"since"`
	Heartbeat time.Time `json:"heartbeat"`
}

type examinedEntry struct {
	UUID  string `json:"uuid"`
	Role  int32  `json:"role"`
	State string `json:"state"`
}

func (c *cli) examineCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "examine MEMBER...",
		Short: "Print the superblock of member devices",
		Long: `Examine reads the raidd superblock of each member, read-only, and prints
the array it belongs to, its role, its event counter and the member table
as this member last knew it. It works on members of a running array too.
It exits 1 if any member has no valid superblock.`,
		Args: args(cobra.MinimumNArgs(1)),
	}
	asJSON := cmd.Flags().Bool("json", false, "print JSON")
	cmd.RunE = func(_ *cobra.Command, paths []string) error {
		var (
			out  []examined
			errs []error
		)
		for _, p := range paths {
			e, err := examine(p)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p, err))
				e = examined{Path: p, Error: err.Error()}
			}
			out = append(out, e)
		}
		if *asJSON {
			enc := json.NewEncoder(c.stdout)
			enc.SetIndent("", "  ")
			if err := enc.Encode(out); err != nil {
				return err
			}
		} else {
			for i := range out {
				if i > 0 {
					fmt.Fprintln(c.stdout)
				}
				printExamined(c.stdout, &out[i])
			}
		}
		return errors.Join(errs...)
	}
	return cmd
}

// examine opens path read-only, without taking the member lock, and
// decodes its superblock.
func examine(path string) (examined, error) {
	f, err := member.Open(path, member.Options{ReadOnly: true})
	if err != nil {
		return examined{}, err
	}
	defer f.Close()
	m, err := superblock.Read(f)
	if errors.Is(err, superblock.ErrNoMagic) {
		return examined{}, errors.New("no raidd superblock")
	}
	if err != nil {
		return examined{}, err
	}
	e := examined{
		Path: path, ArrayUUID: superblock.FormatUUID(m.ArrayUUID), Name: m.Name,
		Level: stripe.Level(m.Level).String(), Chunk: m.ChunkSize, RaidMembers: m.RaidDisks,
		Role: m.Role, MemberUUID: superblock.FormatUUID(m.MemberUUID),
		DataOffset: m.DataOffset, DataSize: m.DataSize, Events: m.Events, State: m.State.String(),
		RebuildRole: m.RebuildRole, RebuildCheckpoint: m.RebuildCheckpoint, Scrub: examineScrub(m),
		ConsistencyPolicy: raid.ConsistencyPolicyOf(m), LogOffset: m.LogOffset, LogLength: m.LogLength,
		Created: time.Unix(0, m.CreateTime).UTC(), Updated: time.Unix(0, m.UpdateTime).UTC(),
	}
	e.Removed = slices.ContainsFunc(m.Members, func(mi superblock.MemberInfo) bool {
		return mi.UUID == m.MemberUUID && mi.State == superblock.MemberRemoved
	})
	if m.Checksums {
		e.Checksums = &examinedChecksums{Offset: m.ChecksumOffset, Length: m.ChecksumLength}
	}
	for _, mi := range m.Members {
		e.Members = append(e.Members, examinedEntry{UUID: superblock.FormatUUID(mi.UUID), Role: mi.Role, State: mi.State.String()})
	}
	// In role order (the table keeps slots in the order members joined),
	// the members without a role (spares, retired) last.
	slices.SortStableFunc(e.Members, func(x, y examinedEntry) int {
		rank := func(r int32) int64 {
			if r < 0 {
				return 1 << 40
			}
			return int64(r)
		}
		return cmp.Compare(rank(x.Role), rank(y.Role))
	})
	if h, err := superblock.ReadInUse(f); err == nil {
		e.InUse = &examinedHolder{Host: h.Host, PID: h.PID, Path: h.Path,
			Since: time.Unix(0, h.Since).UTC(), Heartbeat: time.Unix(0, h.Heartbeat).UTC()}
	}
	return e, nil
}

func printExamined(w io.Writer, e *examined) {
	fmt.Fprintf(w, "%s:\n", e.Path)
	if e.Error != "" {
		fmt.Fprintf(w, "  error: %s\n", e.Error)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	row := func(k string, format string, a ...any) {
		fmt.Fprintf(tw, "  %s:\t"+format+"\n", append([]any{k}, a...)...)
	}
	row("array", "%q (uuid %s)", e.Name, e.ArrayUUID)
	row("level", "%s, %d members, chunk %s", e.Level, e.RaidMembers, formatSize(int64(e.Chunk)))
	switch {
	case e.Removed:
		row("this member", "uuid %s, removed: it left the array (retired by a replace), and its data is not the array's; while the raidd that retired it runs, 'raidd remove ARRAY PATH' releases it; 'raidd add' takes it back as a new member", e.MemberUUID)
	case e.Role < 0:
		row("this member", "spare, uuid %s", e.MemberUUID)
	default:
		row("this member", "role %d, uuid %s", e.Role, e.MemberUUID)
	}
	row("data region", "offset %d, size %s (%d bytes)", e.DataOffset, formatSize(int64(e.DataSize)), e.DataSize)
	if c := e.Checksums; c != nil {
		row("checksums", "CRC32C per 4KiB block, area at offset %d, %s", c.Offset, formatSize(int64(c.Length)))
	} else {
		row("checksums", "none")
	}
	row("state", "%s, events %d", e.State, e.Events)
	if e.LogLength != 0 {
		row("consistency policy", "%s (write-hole log area at offset %d, %s)", e.ConsistencyPolicy, e.LogOffset, formatSize(int64(e.LogLength)))
	} else if e.ConsistencyPolicy != "" {
		row("consistency policy", "%s", e.ConsistencyPolicy)
	}
	if e.RebuildRole >= 0 {
		row("rebuild", "role %d up to data offset %d", e.RebuildRole, e.RebuildCheckpoint)
	}
	switch sc := e.Scrub; {
	case sc == nil:
		row("scrub", "never")
	case sc.Running:
		pct := 0.0
		if sc.Rows > 0 {
			pct = 100 * float64(sc.ResumeRow) / float64(sc.Rows)
		}
		row("scrub", "%s in progress at row %d of %d (%.1f%%); if no raidd runs it, it resumes there at the next assembly", sc.Kind, sc.ResumeRow, sc.Rows, pct)
	default:
		row("scrub", "last finished %s", sc.LastFinished.Format(time.RFC3339))
	}
	row("created", "%s", e.Created.Format(time.RFC3339))
	row("updated", "%s", e.Updated.Format(time.RFC3339))
	if h := e.InUse; h != nil {
		row("in use by", "raidd pid %d on %q as %s since %s (heartbeat %s)", h.PID, h.Host, h.Path,
			h.Since.Format(time.RFC3339), h.Heartbeat.Format(time.RFC3339))
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "  member table, as this member last knew it:")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "    ROLE\tSTATE\tUUID")
	for _, m := range e.Members {
		role := fmt.Sprint(m.Role)
		if m.Role < 0 {
			role = "-"
		}
		self := ""
		if m.UUID == e.MemberUUID {
			self = " (this member)"
		}
		fmt.Fprintf(tw, "    %s\t%s\t%s%s\n", role, m.State, m.UUID, self)
	}
	_ = tw.Flush()
}
