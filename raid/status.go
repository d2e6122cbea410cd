package raid

import (
	"slices"
	"sort"
	"time"

	"github.com/raidd/raidd/raid/superblock"
	"github.com/raidd/raidd/stripe"
)

// Status is a snapshot of an array's state, for `raidd status` and logs.
type Status struct {
	Name       string    `json:"name"`
	UUID       string    `json:"uuid"`
	Level      string    `json:"level"`
	Chunk      int64     `json:"chunk"`
	Size       int64     `json:"size"`
	Members    int       `json:"raid_members"`
	State      string    `json:"state"` // clean, dirty, degraded or failed
	Degraded   bool      `json:"degraded"`
	Failed     bool      `json:"failed"`
	Dirty      bool      `json:"dirty"`
	ReadOnly   bool      `json:"read_only"`
	EventCount uint64    `json:"events"`
	Resync     *Progress `json:"resync,omitempty"`
	// LastResync is the resync since assembly that has finished (or stopped), if any.
	LastResync *Progress `json:"last_resync,omitempty"`
	Recovery   *Progress `json:"recovery,omitempty"` // a rebuild, re-add or replace
	// LastRecovery is the rebuild, re-add or replace that ran last, once it
	// has finished or stopped.
	LastRecovery *Progress `json:"last_recovery,omitempty"`
	// Scrub is the running scrub (raidd check), with its progress, ETA and
	// findings so far; LastScrub the one that ended last since assembly.
	Scrub     *ScrubStatus `json:"scrub,omitempty"`
	LastScrub *ScrubStatus `json:"last_scrub,omitempty"`
	// LastScrubFinished is when the last scrub finished, as the
	// superblocks record it (it survives restarts); zero if never.
	LastScrubFinished time.Time          `json:"last_scrub_finished,omitzero"`
	Bitmap            *BitmapStatus      `json:"bitmap,omitempty"`
	StripeCache       *StripeCacheStatus `json:"stripe_cache,omitempty"`
	// Checksums describes the per-block checksums; nil without them.
	Checksums *ChecksumStatus `json:"checksums,omitempty"`
	// ConsistencyPolicy says in md's words what keeps redundancy right
	// across a crash: "ppl" (bitmap plus the partial parity log of a
	// RAID5 or RAID6), "bitmap", "resync" (no bitmap: a crash resyncs
	// everything) or "none" (no redundancy).
	ConsistencyPolicy string         `json:"consistency_policy"`
	Journal           *JournalStatus `json:"journal,omitempty"`
	Devices           []MemberStatus `json:"members"`
	Stats             Stats          `json:"stats"`
	History           []Event        `json:"history,omitempty"` // the most recent, oldest first
}

// Progress describes a background job over the rows of the array.
type Progress struct {
	Kind string `json:"kind"` // resync, rebuild, re-add or replace
	Role int    `json:"role"` // -1 for a resync
	Path string `json:"path,omitempty"`
	// ExtraRoles and ExtraPaths are the further roles a rebuild of several
	// roles reconstructs in the same pass, and their devices.
	ExtraRoles []int    `json:"extra_roles,omitempty"`
	ExtraPaths []string `json:"extra_paths,omitempty"`
	// Done and Total count rows: for a rebuild or replace, the position
	// and the array's rows; for a re-add, the rows resynced so far and the
	// rows of the bitmap regions it resyncs (of ArrayRows).
	Done      int64   `json:"done_rows"`
	Total     int64   `json:"total_rows"`
	ArrayRows int64   `json:"array_rows"`
	Percent   float64 `json:"percent"`
	// BytesMoved counts the bytes the job actually read or wrote on its
	// busiest member (rows rebuilt as holes cost nothing), and BytesPerSec
	// is that over the time the job has run: on a sparse array both are
	// well below rows × chunk.
	BytesMoved  int64   `json:"bytes_moved"`
	BytesPerSec float64 `json:"bytes_per_sec,omitempty"`
	// RowsPerSec is the rows done per second so far, and ETASeconds the
	// rows left at that pace: rows, not bytes, since hole rows go by
	// without moving any.
	RowsPerSec float64 `json:"rows_per_sec,omitempty"`
	ETASeconds float64 `json:"eta_seconds,omitempty"`
}

// BitmapStatus describes the write-intent bitmap.
type BitmapStatus struct {
	Region  int64 `json:"region_bytes"`
	Regions int64 `json:"regions"`
	Dirty   int   `json:"dirty_regions"`
}

// StripeCacheStatus describes the stripe cache of a parity array (see
// Options.StripeCache).
type StripeCacheStatus struct {
	Limit   int64 `json:"limit_bytes"`    // memory it may use
	Bytes   int64 `json:"bytes"`          // stripe buffers holding cached data
	Stripes int64 `json:"cached_stripes"` // stripes with cached data
	// FullStripeWrites counts cached stripes written out complete (no
	// reads); PartialWriteouts the others (by deadline, memory pressure,
	// FLUSH, FUA, TRIM or WRITE_ZEROES); Bypassed counts partial-stripe
	// pieces written at once because the cache was full.
	FullStripeWrites int64 `json:"full_stripe_writes"`
	PartialWriteouts int64 `json:"partial_writeouts"`
	Bypassed         int64 `json:"bypassed"`
	// RandomWrites says whether the cache holds random partial-stripe
	// writes too (Options.RandomWriteBack, as it applies to the array's
	// members now).
	RandomWrites bool `json:"holds_random_writes"`
}

// JournalStatus describes the write-hole log (consistency policy "ppl",
// a partial parity log): the log area on each member, the row writes
// recorded and the bytes that cost (on every log written: two per record
// on RAID6), the checkpoints taken, the records replayed at assembly, and
// the log writes that carried the records.
type JournalStatus struct {
	AreaBytes    int64 `json:"area_bytes"`
	Records      int64 `json:"records"`
	BytesWritten int64 `json:"bytes_written"`
	Checkpoints  int64 `json:"checkpoints"`
	Replayed     int64 `json:"replayed"`
	// LogWrites counts the durable log writes, every member's: records
	// written together (group commit) share one.
	LogWrites int64 `json:"log_writes"`
	// SlotBytes is the slot size of the current epoch's log when it is
	// slotted (every member held in memory: records in reused slots,
	// cleared once their row write is done); 0 when records are appended.
	SlotBytes int64 `json:"slot_bytes"`
}

// ConsistencyPolicyOf names, in md's words, what keeps the redundancy of
// the array a superblock describes right across a crash: "ppl" (a
// write-hole log area), "bitmap", "resync" (no bitmap) or "none" (RAID0).
func ConsistencyPolicyOf(m *superblock.Meta) string {
	switch {
	case m.LogLength != 0:
		return "ppl"
	case m.Level == 0:
		return "none"
	case m.BitmapRegion != 0:
		return "bitmap"
	}
	return "resync"
}

// MemberStatus describes one member or missing role.
type MemberStatus struct {
	Role        int    `json:"role"` // -1 for members not holding a role
	Path        string `json:"path,omitempty"`
	UUID        string `json:"uuid"`
	State       string `json:"state"` // active, rebuilding, replacing, failed, spare, removed, missing, stale
	Events      uint64 `json:"events"`
	WriteMostly bool   `json:"write_mostly,omitempty"`
	Note        string `json:"note,omitempty"`
	// IOErrors counts the member requests that failed on this device, and
	// Repairs the ranges rewritten on it with data reconstructed from
	// redundancy (RepairBytes their bytes), since this raidd opened it
	// (a re-added device starts again from zero). Zero for a missing role.
	IOErrors    MemberIOErrors `json:"io_errors"`
	Repairs     int64          `json:"repairs"`
	RepairBytes int64          `json:"repair_bytes"`
	// ChecksumRepairs counts the blocks of this role that failed their
	// checksum and were rewritten from redundancy since the array started.
	ChecksumRepairs int64 `json:"checksum_repairs,omitempty"`
}

// Stats counts the bytes clients asked for and the member bytes that
// served them, with background work (rebuild, replace, resync, read-error
// repair) in counters of its own. Superblock and bitmap updates are not
// counted. Member bytes are counted once the member I/O succeeded.
type Stats struct {
	ClientBytesRead    int64 `json:"client_bytes_read"`
	ClientBytesWritten int64 `json:"client_bytes_written"` // WRITE requests
	ClientBytesZeroed  int64 `json:"client_bytes_zeroed"`  // TRIM and WRITE_ZEROES requests

	// Member traffic of client WRITE requests: data, parity and mirror
	// copies written (to a replacement being built too), and the all-zero
	// 4 KiB blocks of those member writes that were punched as holes
	// instead (zero-block elision).
	MemberBytesWritten int64 `json:"member_bytes_written"`
	MemberBytesElided  int64 `json:"member_bytes_elided"`
	// Member traffic of TRIM and WRITE_ZEROES requests: bytes punched as
	// holes, and zeroes and parity written (partial RAID5 rows, NO_HOLE,
	// members that cannot punch).
	MemberBytesDiscarded   int64 `json:"member_bytes_discarded"`
	MemberBytesZeroWritten int64 `json:"member_bytes_zero_written"`

	// Background member writes. Rebuild counts rebuilds and replaces:
	// rows written to the new member, and never-written rows punched on it.
	RebuildBytesWritten   int64 `json:"rebuild_bytes_written"`
	RebuildBytesDiscarded int64 `json:"rebuild_bytes_discarded"`
	// ResyncBytesWritten counts parity or copies rewritten by a resync.
	ResyncBytesWritten int64 `json:"resync_bytes_written"`
	// ScrubBytesWritten counts what scrub repairs rewrote (raidd check
	// --repair).
	ScrubBytesWritten int64 `json:"scrub_bytes_written"`
	// RepairBytesWritten counts bytes rewritten after read errors.
	RepairBytesWritten int64 `json:"repair_bytes_written"`

	// CoalescedWrites counts client writes merged into another's stripe write.
	CoalescedWrites int64 `json:"coalesced_writes"`
	// WriteAmplification is (MemberBytesWritten + MemberBytesElided) /
	// ClientBytesWritten: the member bytes each byte of a client WRITE
	// costs in data, parity and copies. Elided blocks count as if written,
	// so zero data neither lowers nor raises it; background work, TRIM and
	// WRITE_ZEROES are not in it. 0 until a client has written.
	WriteAmplification float64 `json:"write_amplification"`
}

// Status returns a snapshot. It is safe to call at any time and never
// waits for member I/O: the member table it reports is the one recorded at
// the end of the last configuration change (see snapshot.go).
func (a *Array) Status() Status {
	snap := a.snap.Load()
	meta, v := snap.meta, snap.view
	st := Status{
		Name: meta.Name, UUID: superblock.FormatUUID(meta.ArrayUUID),
		Level: a.geo.Level().String(), Chunk: a.geo.Chunk(), Size: a.geo.Size(),
		Members: a.geo.Members(), Degraded: v.Degraded(), Failed: v.failed,
		Dirty: a.dirty.Load(), ReadOnly: a.readOnly, EventCount: meta.Events,
	}
	switch {
	case st.Failed:
		st.State = "failed"
	case st.Degraded:
		st.State = "degraded"
	case st.Dirty:
		st.State = "dirty"
	default:
		st.State = "clean"
	}
	if total := a.resyncTotal.Load(); total > 0 {
		done := a.resyncRow.Load()
		p := &Progress{Kind: "resync", Role: -1, Done: done, Total: total, Percent: 100 * float64(done) / float64(total)}
		if a.resyncing.Load() {
			st.Resync = p
		} else {
			st.LastResync = p
		}
	}
	if j := snap.job; j != nil {
		st.Recovery = a.jobProgress(j.j, j.kind, true)
	} else if j := snap.lastJob; j != nil {
		st.LastRecovery = a.jobProgress(j.j, j.kind, false)
	}
	if j := a.scrubJob.Load(); j != nil {
		st.Scrub = a.scrubStatus(j, true)
	} else if j := a.lastScrub.Load(); j != nil {
		st.LastScrub = a.scrubStatus(j, false)
	}
	if v := meta.Scrub; v != 0 && v&superblock.ScrubRunning == 0 {
		st.LastScrubFinished = time.Unix(int64(v), 0)
	}
	if b := a.bitmap; b != nil {
		st.Bitmap = &BitmapStatus{Region: b.region, Regions: b.n, Dirty: len(b.dirtyRegions())}
	}
	st.Checksums = a.checksumStatus()
	if c := a.cache; c != nil {
		n, full := c.count.Load(), c.full.Load()
		st.StripeCache = &StripeCacheStatus{Limit: int64(c.max) * c.width, Bytes: n * c.width, Stripes: n,
			FullStripeWrites: full, PartialWriteouts: c.flushes.Load() - full, Bypassed: c.bypass.Load(), RandomWrites: a.holdsRandom()}
	}
	st.ConsistencyPolicy = ConsistencyPolicyOf(meta)
	if j := a.journal; j != nil {
		st.Journal = &JournalStatus{AreaBytes: int64(meta.LogLength), Records: j.records.Load(), BytesWritten: j.bytes.Load(), Checkpoints: j.checkpoints.Load(), Replayed: j.replayed, LogWrites: j.logWrites.Load(), SlotBytes: j.slot.Load()}
	}
	st.History = a.recentEvents()
	held := map[int]bool{}
	for _, mi := range meta.Members {
		ms := MemberStatus{Role: int(mi.Role), UUID: superblock.FormatUUID(mi.UUID), State: mi.State.String()}
		if s, ok := snap.slots[mi.UUID]; ok {
			ms.Path, ms.Events, ms.WriteMostly, ms.Note = s.path, s.events, s.writeMostly, s.note
			s.ctr.load(&ms)
		} else if mi.State != superblock.MemberRemoved {
			ms.Note = "device not present"
		}
		if mi.State == superblock.MemberActive || mi.State == superblock.MemberRebuilding {
			held[int(mi.Role)] = true
			if a.csum != nil && mi.Role >= 0 && int(mi.Role) < stripe.MaxMembers {
				ms.ChecksumRepairs = a.csum.repaired[mi.Role].Load()
			}
		}
		st.Devices = append(st.Devices, ms)
	}
	for _, s := range snap.dead {
		i := slices.IndexFunc(st.Devices, func(d MemberStatus) bool { return d.UUID == superblock.FormatUUID(s.uuid) })
		if i < 0 {
			// Not in the member table (removed, or retired by a
			// replace): shown all the same, since it was listed.
			st.Devices = append(st.Devices, MemberStatus{Role: -1, UUID: superblock.FormatUUID(s.uuid)})
			i = len(st.Devices) - 1
		}
		st.Devices[i].Path, st.Devices[i].Events, st.Devices[i].Note = s.path, s.events, s.note
		s.ctr.load(&st.Devices[i])
		st.Devices[i].State = "stale"
	}
	for r := 0; r < a.geo.Members(); r++ {
		if !held[r] {
			found := false
			for _, d := range st.Devices {
				if d.Role == r {
					found = true
				}
			}
			if !found {
				st.Devices = append(st.Devices, MemberStatus{Role: r, State: "missing"})
			}
		}
	}
	sort.SliceStable(st.Devices, func(i, j int) bool {
		ri, rj := st.Devices[i].Role, st.Devices[j].Role
		if ri < 0 {
			ri = 1 << 30
		}
		if rj < 0 {
			rj = 1 << 30
		}
		return ri < rj
	})
	st.Stats = a.byteStats()
	return st
}

// stats reads the byte counters.
func (a *Array) byteStats() Stats {
	c := &a.member
	s := Stats{
		ClientBytesRead:        a.stats.clientRead.Load(),
		ClientBytesWritten:     a.stats.clientWritten.Load(),
		ClientBytesZeroed:      a.stats.clientZeroed.Load(),
		MemberBytesWritten:     c.written[causeWrite].Load(),
		MemberBytesElided:      c.punched[causeWrite].Load(),
		MemberBytesDiscarded:   c.punched[causeZero].Load(),
		MemberBytesZeroWritten: c.written[causeZero].Load(),
		RebuildBytesWritten:    c.written[causeRebuild].Load(),
		RebuildBytesDiscarded:  c.punched[causeRebuild].Load(),
		ResyncBytesWritten:     c.written[causeResync].Load(),
		ScrubBytesWritten:      c.written[causeScrub].Load(),
		RepairBytesWritten:     c.repaired.Load(),
		CoalescedWrites:        a.stats.coalesced.Load(),
	}
	if s.ClientBytesWritten > 0 {
		s.WriteAmplification = float64(s.MemberBytesWritten+s.MemberBytesElided) / float64(s.ClientBytesWritten)
	}
	return s
}

// jobProgress describes j, whose kind was kind when the table was last
// recorded (see snapshot.go); running says it was the running job.
func (a *Array) jobProgress(j *recovery, kind jobKind, running bool) *Progress {
	rows := a.geo.Rows()
	p := &Progress{Kind: kind.String(), Role: j.role, Path: j.target.path, Done: j.row.Load(), Total: rows, ArrayRows: rows}
	for _, t := range j.extra {
		p.ExtraRoles = append(p.ExtraRoles, t.role)
		p.ExtraPaths = append(p.ExtraPaths, t.target.path)
	}
	rowsDone := p.Done - j.first
	if j.regions != nil {
		p.Kind, p.Done, p.Total = "re-add", j.done.Load(), j.planned
		rowsDone = p.Done
	}
	p.BytesMoved = j.moved.Load()
	p.Percent = 100
	if p.Total > 0 {
		p.Percent = 100 * float64(p.Done) / float64(p.Total)
	}
	if el := a.clock.Now().Sub(j.start).Seconds(); el > 0 && rowsDone > 0 && running {
		p.BytesPerSec = float64(p.BytesMoved) / el
		p.RowsPerSec = float64(rowsDone) / el
		p.ETASeconds = float64(p.Total-p.Done) / p.RowsPerSec
	}
	return p
}
