package main

import (
	"cmp"
	"log/slog"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/raidd/raidd/raid"
)

// metrics is the daemon's Prometheus registry (a registry of its own, not
// the global one): the request latency histograms, which the exports
// observe as requests complete, and a collector that turns the daemon's
// status into gauges and counters at each scrape, so /metrics and
// 'raidd status' always agree.
type metrics struct {
	reg     *prometheus.Registry
	latency *prometheus.HistogramVec
}

// latencyBuckets are the upper bounds, in seconds, of the request latency
// histograms: from a page-cache hit (tens of microseconds) to a stalled
// member (seconds).
var latencyBuckets = []float64{
	0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
	0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
}

// The operations of the latency histograms (the "operation" label).
const (
	opRead        = "read"
	opWrite       = "write"
	opFlush       = "flush"
	opTrim        = "trim"
	opWriteZeroes = "write_zeroes"
)

// newMetrics builds the registry of d. status is read at every scrape.
func newMetrics(status func() statusReply) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "raidd_request_duration_seconds",
			Help:    "Time the array took to serve NBD requests, by export and operation (read, write with or without FUA, flush, trim, write_zeroes), from the request reaching the array to its completion; network and queueing before it are not included.",
			Buckets: latencyBuckets,
		}, []string{"export", "operation"}),
	}
	m.reg.MustRegister(m.latency, &statusCollector{status: status},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// handler serves the registry in the format the scraper asks for (the
// text format by default). A problem with one metric is logged and the
// others are still served.
func (m *metrics) handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
}

// timedArray is an export's device: the array, with the latency of every
// read, write, flush, trim and write-zeroes observed in the export's
// histograms. Every other method, and so every optional nbd capability, is
// the array's own.
type timedArray struct {
	*raid.Array
	read, write, flush, trim, zero prometheus.Observer
}

var _ exportDevice = (*timedArray)(nil)

// timed wraps a for the export named export.
func (m *metrics) timed(a *raid.Array, export string) *timedArray {
	o := func(op string) prometheus.Observer { return m.latency.WithLabelValues(export, op) }
	return &timedArray{Array: a, read: o(opRead), write: o(opWrite), flush: o(opFlush), trim: o(opTrim), zero: o(opWriteZeroes)}
}

func observe(o prometheus.Observer, start time.Time) { o.Observe(time.Since(start).Seconds()) }

func (t *timedArray) ReadAt(p []byte, off int64) (int, error) {
	defer observe(t.read, time.Now())
	return t.Array.ReadAt(p, off)
}

// SpliceReadAt times a read served by splicing (staged for the socket); a
// read it declines is timed by the ReadAt that serves it.
func (t *timedArray) SpliceReadAt(p []byte, off int64, send func(src syscall.RawConn, srcOff int64, n int) error) bool {
	start := time.Now()
	if !t.Array.SpliceReadAt(p, off, send) {
		return false
	}
	observe(t.read, start)
	return true
}

// ReceiveAt times a write received into the members' memory, from its
// first byte received to its last (so it includes the client's sending);
// one it declines is timed by the WriteAt that serves it.
func (t *timedArray) ReceiveAt(p []byte, off int64, pre []byte, recv func(dsts [][]byte, atLeast int) (int, error)) (int, error) {
	start := time.Now()
	n, err := t.Array.ReceiveAt(p, off, pre, recv)
	if n > 0 {
		observe(t.write, start)
	}
	return n, err
}

func (t *timedArray) WriteAt(p []byte, off int64) (int, error) {
	defer observe(t.write, time.Now())
	return t.Array.WriteAt(p, off)
}

func (t *timedArray) WriteAtFUA(p []byte, off int64) (int, error) {
	defer observe(t.write, time.Now())
	return t.Array.WriteAtFUA(p, off)
}

func (t *timedArray) Sync() error {
	defer observe(t.flush, time.Now())
	return t.Array.Sync()
}

func (t *timedArray) Discard(off, n int64) error {
	defer observe(t.trim, time.Now())
	return t.Array.Discard(off, n)
}

func (t *timedArray) WriteZeroes(off, n int64, noHole bool) error {
	defer observe(t.zero, time.Now())
	return t.Array.WriteZeroes(off, n, noHole)
}

// statusCollector turns a status snapshot into metrics at each scrape.
type statusCollector struct {
	status func() statusReply
}

// desc is one metric family of the status collector.
type desc struct {
	*prometheus.Desc
	typ prometheus.ValueType
}

func newDesc(name, help string, typ prometheus.ValueType, labels ...string) desc {
	return desc{prometheus.NewDesc(name, help, labels, nil), typ}
}

// The families of the status collector. Names predating client_golang are
// kept as they were.
var (
	arrayLabel = []string{"array"}

	descArrayInfo = newDesc("raidd_array_info", "Array identity; always 1.", prometheus.GaugeValue, "array", "export", "level", "uuid")
	arrayGauges   = []struct {
		d desc
		f func(a *arrayStatus) float64
	}{
		{newDesc("raidd_array_assembled", "1 if the array is assembled and served; 0 if it could not be assembled at start (then raidd_array_failed is 1).", prometheus.GaugeValue, arrayLabel...), func(a *arrayStatus) float64 { return bool01(a.Error == "") }},
		{newDesc("raidd_array_size_bytes", "Usable array size.", prometheus.GaugeValue, arrayLabel...), func(a *arrayStatus) float64 { return float64(a.Size) }},
		{newDesc("raidd_array_chunk_bytes", "Chunk size.", prometheus.GaugeValue, arrayLabel...), func(a *arrayStatus) float64 { return float64(a.Chunk) }},
		{newDesc("raidd_array_degraded", "1 if the array runs without full redundancy.", prometheus.GaugeValue, arrayLabel...), func(a *arrayStatus) float64 { return bool01(a.Degraded) }},
		{newDesc("raidd_array_failed", "1 if the array lost more members than its level tolerates.", prometheus.GaugeValue, arrayLabel...), func(a *arrayStatus) float64 { return bool01(a.Failed) }},
		{newDesc("raidd_array_dirty", "1 if the superblocks say dirty (writes may be in flight).", prometheus.GaugeValue, arrayLabel...), func(a *arrayStatus) float64 { return bool01(a.Dirty) }},
		{newDesc("raidd_array_read_only", "1 if the array is exported read-only.", prometheus.GaugeValue, arrayLabel...), func(a *arrayStatus) float64 { return bool01(a.ReadOnly) }},
		{newDesc("raidd_array_events", "Superblock event counter.", prometheus.GaugeValue, arrayLabel...), func(a *arrayStatus) float64 { return float64(a.EventCount) }},
		{newDesc("raidd_array_resync_ratio", "Progress of the running resync from 0 to 1; 1 when none runs.", prometheus.GaugeValue, arrayLabel...), func(a *arrayStatus) float64 { return ratio(a.Resync) }},
		{newDesc("raidd_array_client_read_bytes_total", "Bytes read by clients.", prometheus.CounterValue, arrayLabel...), func(a *arrayStatus) float64 { return float64(a.Stats.ClientBytesRead) }},
		{newDesc("raidd_array_client_written_bytes_total", "Bytes written by clients.", prometheus.CounterValue, arrayLabel...), func(a *arrayStatus) float64 { return float64(a.Stats.ClientBytesWritten) }},
		{newDesc("raidd_array_client_zeroed_bytes_total", "Bytes discarded or zeroed by clients.", prometheus.CounterValue, arrayLabel...), func(a *arrayStatus) float64 { return float64(a.Stats.ClientBytesZeroed) }},
		{newDesc("raidd_array_member_written_bytes_total", "Bytes written to members for client writes, parity and mirrors included.", prometheus.CounterValue, arrayLabel...), func(a *arrayStatus) float64 { return float64(a.Stats.MemberBytesWritten) }},
		{newDesc("raidd_array_member_elided_bytes_total", "All-zero blocks of member writes for client writes punched instead of written.", prometheus.CounterValue, arrayLabel...), func(a *arrayStatus) float64 { return float64(a.Stats.MemberBytesElided) }},
		{newDesc("raidd_array_member_discarded_bytes_total", "Bytes punched on members for client discards and write-zeroes.", prometheus.CounterValue, arrayLabel...), func(a *arrayStatus) float64 { return float64(a.Stats.MemberBytesDiscarded) }},
		{newDesc("raidd_array_member_zero_written_bytes_total", "Zeroes and parity written to members for client discards and write-zeroes.", prometheus.CounterValue, arrayLabel...), func(a *arrayStatus) float64 { return float64(a.Stats.MemberBytesZeroWritten) }},
		{newDesc("raidd_array_write_amplification", "(member bytes written + zero blocks elided) / client bytes written, for client writes only.", prometheus.GaugeValue, arrayLabel...), func(a *arrayStatus) float64 { return a.Stats.WriteAmplification }},
		{newDesc("raidd_array_rebuild_written_bytes_total", "Bytes written to new members by rebuilds and replaces.", prometheus.CounterValue, arrayLabel...), func(a *arrayStatus) float64 { return float64(a.Stats.RebuildBytesWritten) }},
		{newDesc("raidd_array_rebuild_discarded_bytes_total", "Never-written rows punched on new members by rebuilds and replaces.", prometheus.CounterValue, arrayLabel...), func(a *arrayStatus) float64 { return float64(a.Stats.RebuildBytesDiscarded) }},
		{newDesc("raidd_array_resync_written_bytes_total", "Parity and copies rewritten by resyncs.", prometheus.CounterValue, arrayLabel...), func(a *arrayStatus) float64 { return float64(a.Stats.ResyncBytesWritten) }},
		{newDesc("raidd_array_repair_written_bytes_total", "Bytes rewritten on members after read errors.", prometheus.CounterValue, arrayLabel...), func(a *arrayStatus) float64 { return float64(a.Stats.RepairBytesWritten) }},
		{newDesc("raidd_array_checksum_repaired_blocks_total", "Blocks that failed their checksum and were rewritten from redundancy (arrays created with --checksums; 0 otherwise).", prometheus.CounterValue, arrayLabel...), func(a *arrayStatus) float64 {
			return csumField(a, func(c *raid.ChecksumStatus) int64 { return c.Repaired })
		}},
		{newDesc("raidd_array_checksum_lost_blocks_total", "Blocks that failed their checksum with no copy or parity to rebuild them: their reads failed with EIO.", prometheus.CounterValue, arrayLabel...), func(a *arrayStatus) float64 {
			return csumField(a, func(c *raid.ChecksumStatus) int64 { return c.Lost })
		}},
		{newDesc("raidd_array_checksum_pages_rebuilt_total", "Checksum pages that failed their own CRC32C and were rebuilt.", prometheus.CounterValue, arrayLabel...), func(a *arrayStatus) float64 {
			return csumField(a, func(c *raid.ChecksumStatus) int64 { return c.PagesRebuilt })
		}},
		{newDesc("raidd_array_scrub_written_bytes_total", "Bytes scrub repairs (raidd check --repair) rewrote on members.", prometheus.CounterValue, arrayLabel...), func(a *arrayStatus) float64 { return float64(a.Stats.ScrubBytesWritten) }},
	}

	// Background jobs: one "running" series per job kind (0 or 1), and
	// the position of a running job while it runs.
	descJobRunning = newDesc("raidd_array_job_running", "1 while a background job of this kind runs on the array: rebuild, re-add or replace (one at a time), resync, scrub (raidd check).", prometheus.GaugeValue, "array", "job")
	descJobRatio   = newDesc("raidd_array_job_progress_ratio", "Progress of the running background job from 0 to 1.", prometheus.GaugeValue, "array", "job")
	descJobDone    = newDesc("raidd_array_job_done_rows", "Rows the running background job has done (a rebuild's or replace's position; the rows a re-add or resync has resynced).", prometheus.GaugeValue, "array", "job")
	descJobPlanned = newDesc("raidd_array_job_planned_rows", "Rows the running background job will do in all (a rebuild's or replace's: the array's rows).", prometheus.GaugeValue, "array", "job")
	descJobMoved   = newDesc("raidd_array_job_moved_bytes", "Bytes the running rebuild, re-add or replace read or wrote on its busiest member (rows rebuilt as holes move nothing).", prometheus.GaugeValue, "array", "job")
	descJobETA     = newDesc("raidd_array_job_eta_seconds", "Estimated time left of the running rebuild, re-add or replace, at its pace so far.", prometheus.GaugeValue, "array", "job")

	descScrubMismatches = newDesc("raidd_array_scrub_mismatches", "Chunks the running scrub (raidd check) found wrong so far or, when none runs, that the last scrub found (md's mismatch_cnt, in chunks).", prometheus.GaugeValue, arrayLabel...)
	descScrubRepaired   = newDesc("raidd_array_scrub_repaired", "Of raidd_array_scrub_mismatches, the chunks the scrub rewrote (check --repair).", prometheus.GaugeValue, arrayLabel...)
	descScrubFinished   = newDesc("raidd_array_last_scrub_finished_timestamp_seconds", "When the last scrub finished (Unix time); absent until one has.", prometheus.GaugeValue, arrayLabel...)

	// The stripe cache and the write-hole journal of a parity array:
	// present only for arrays that have them.
	descCacheLimit    = newDesc("raidd_array_stripe_cache_limit_bytes", "Memory the stripe cache may use (stripe_cache).", prometheus.GaugeValue, arrayLabel...)
	descCacheBytes    = newDesc("raidd_array_stripe_cache_bytes", "Stripe buffers holding cached, not yet written data.", prometheus.GaugeValue, arrayLabel...)
	descCacheStripes  = newDesc("raidd_array_stripe_cache_stripes", "Stripes holding cached data.", prometheus.GaugeValue, arrayLabel...)
	descCacheFull     = newDesc("raidd_array_stripe_cache_full_writeouts_total", "Cached stripes written out complete, with no member reads.", prometheus.CounterValue, arrayLabel...)
	descCachePartial  = newDesc("raidd_array_stripe_cache_partial_writeouts_total", "Cached stripes written out incomplete (deadline, memory pressure, FLUSH, FUA, TRIM or WRITE_ZEROES).", prometheus.CounterValue, arrayLabel...)
	descCacheBypassed = newDesc("raidd_array_stripe_cache_bypassed_total", "Partial-stripe pieces written at once because the cache was full.", prometheus.CounterValue, arrayLabel...)
	descLogArea       = newDesc("raidd_array_journal_area_bytes", "Size of the write-hole log area on each member (consistency policy journal).", prometheus.GaugeValue, arrayLabel...)
	descLogRecords    = newDesc("raidd_array_journal_records_total", "Partial-stripe row writes recorded in the write-hole log since the array started.", prometheus.CounterValue, arrayLabel...)
	descLogBytes      = newDesc("raidd_array_journal_written_bytes_total", "Bytes written to the write-hole logs (every log written counts).", prometheus.CounterValue, arrayLabel...)
	descLogCheckpts   = newDesc("raidd_array_journal_checkpoints_total", "Checkpoints of the write-hole log (members synced, new epoch).", prometheus.CounterValue, arrayLabel...)
	descLogReplayed   = newDesc("raidd_array_journal_replayed_records", "Records replayed from the write-hole log when the array was assembled.", prometheus.GaugeValue, arrayLabel...)

	descMemberState   = newDesc("raidd_member_state", "1 for the state each member or role is in, 0 for the other states (active, rebuilding, replacing, spare, failed, removed, missing, stale).", prometheus.GaugeValue, "array", "role", "path", "uuid", "state")
	descMemberErrors  = newDesc("raidd_member_io_errors_total", "Member I/O requests that failed, by device and operation (read, write, discard, sync), since raidd opened the device.", prometheus.CounterValue, "array", "path", "uuid", "operation")
	descMemberRepairs = newDesc("raidd_member_repairs_total", "Ranges rewritten on the device with data reconstructed from redundancy (read-error correction), since raidd opened it.", prometheus.CounterValue, "array", "path", "uuid")
	descMemberRepairB = newDesc("raidd_member_repaired_bytes_total", "Bytes of the ranges counted by raidd_member_repairs_total.", prometheus.CounterValue, "array", "path", "uuid")
	descMemberCsum    = newDesc("raidd_member_checksum_repairs_total", "Blocks of the member's role that failed their checksum and were rewritten from redundancy, since the array started (arrays created with --checksums).", prometheus.CounterValue, "array", "path", "uuid")

	descNBDConnections  = newDesc("raidd_nbd_connections_total", "NBD connections accepted.", prometheus.CounterValue)
	descNBDActive       = newDesc("raidd_nbd_active_connections", "NBD connections open now.", prometheus.GaugeValue)
	descNBDHandshakes   = newDesc("raidd_nbd_handshakes_total", "NBD connections that entered transmission.", prometheus.CounterValue)
	descNBDHSFailures   = newDesc("raidd_nbd_handshake_failures_total", "NBD connections closed during the handshake.", prometheus.CounterValue)
	descNBDTLS          = newDesc("raidd_nbd_tls_handshakes_total", "TLS handshakes after NBD_OPT_STARTTLS, by result (a failure closes the connection).", prometheus.CounterValue, "result")
	descNBDRefused      = newDesc("raidd_nbd_refused_connections_total", "NBD connections refused because nbd.max_connections were open.", prometheus.CounterValue)
	descNBDTimeouts     = newDesc("raidd_nbd_timeouts_total", "NBD connections closed by a timeout: idle (nbd.idle_timeout) or io (nbd.io_timeout).", prometheus.CounterValue, "timeout")
	descNBDInFlight     = newDesc("raidd_nbd_in_flight_bytes", "READ and WRITE payload bytes held by NBD requests not yet answered.", prometheus.GaugeValue)
	descNBDRequests     = newDesc("raidd_nbd_requests_total", "NBD requests received, by command.", prometheus.CounterValue, "command")
	descNBDReadBytes    = newDesc("raidd_nbd_read_bytes_total", "Payload bytes sent in successful NBD READ replies.", prometheus.CounterValue)
	descNBDSplicedBytes = newDesc("raidd_nbd_read_spliced_bytes_total", "Payload bytes of NBD READ replies sent from member files without a copy (splice).", prometheus.CounterValue)
	descNBDWriteBytes   = newDesc("raidd_nbd_written_bytes_total", "Payload bytes written by successful NBD WRITEs.", prometheus.CounterValue)
	descNBDStreamed     = newDesc("raidd_nbd_written_streamed_bytes_total", "Payload bytes of NBD WRITEs written to the array while they arrived.", prometheus.CounterValue)
	descNBDReceived     = newDesc("raidd_nbd_written_received_bytes_total", "Payload bytes of NBD WRITEs received straight into the members' memory (no copy from a buffer).", prometheus.CounterValue)
	descNBDErrors       = newDesc("raidd_nbd_error_replies_total", "NBD replies carrying an error.", prometheus.CounterValue)
)

// memberStates are the states raidd_member_state reports for every
// member: raid.MemberStatus.State takes these values.
var memberStates = []string{"active", "rebuilding", "replacing", "spare", "failed", "removed", "missing", "stale"}

// recoveryJobs are the kinds of raid.Status.Recovery (one runs at a time).
var recoveryJobs = []string{"rebuild", "re-add", "replace"}

func (c *statusCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descArrayInfo.Desc
	for _, g := range arrayGauges {
		ch <- g.d.Desc
	}
	for _, d := range []desc{descJobRunning, descJobRatio, descJobDone, descJobPlanned, descJobMoved, descJobETA,
		descScrubMismatches, descScrubRepaired, descScrubFinished,
		descCacheLimit, descCacheBytes, descCacheStripes, descCacheFull, descCachePartial, descCacheBypassed,
		descLogArea, descLogRecords, descLogBytes, descLogCheckpts, descLogReplayed,
		descMemberState, descMemberErrors, descMemberRepairs, descMemberRepairB, descMemberCsum,
		descNBDConnections, descNBDActive, descNBDHandshakes, descNBDHSFailures, descNBDTLS, descNBDRefused,
		descNBDTimeouts, descNBDInFlight, descNBDRequests, descNBDReadBytes, descNBDSplicedBytes, descNBDWriteBytes, descNBDErrors} {
		ch <- d.Desc
	}
}

func (c *statusCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.status()
	emit := func(d desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d.Desc, d.typ, v, labels...)
	}
	for i := range st.Arrays {
		a := &st.Arrays[i]
		emit(descArrayInfo, 1, a.Name, a.Export, a.Level, a.UUID)
		for _, g := range arrayGauges {
			emit(g.d, g.f(a), a.Name)
		}
		c.collectJobs(emit, a)
		collectCacheAndLog(emit, a)
		for _, m := range a.Devices {
			role := strconv.Itoa(m.Role)
			known := false
			for _, s := range memberStates {
				known = known || s == m.State
				emit(descMemberState, bool01(s == m.State), a.Name, role, m.Path, m.UUID, s)
			}
			if !known {
				emit(descMemberState, 1, a.Name, role, m.Path, m.UUID, m.State)
			}
			if m.Path == "" {
				continue // a missing role: no device to count on
			}
			e := m.IOErrors
			for _, op := range []struct {
				name string
				v    int64
			}{{"read", e.Read}, {"write", e.Write}, {"discard", e.Discard}, {"sync", e.Sync}} {
				emit(descMemberErrors, float64(op.v), a.Name, m.Path, m.UUID, op.name)
			}
			emit(descMemberRepairs, float64(m.Repairs), a.Name, m.Path, m.UUID)
			emit(descMemberRepairB, float64(m.RepairBytes), a.Name, m.Path, m.UUID)
			if a.Checksums != nil {
				emit(descMemberCsum, float64(m.ChecksumRepairs), a.Name, m.Path, m.UUID)
			}
		}
	}

	n := st.NBD
	emit(descNBDConnections, float64(n.Connections))
	emit(descNBDActive, float64(n.ActiveConnections))
	emit(descNBDHandshakes, float64(n.Handshakes))
	emit(descNBDHSFailures, float64(n.HandshakeFailures))
	emit(descNBDTLS, float64(n.TLSHandshakes), "ok")
	emit(descNBDTLS, float64(n.TLSFailures), "failed")
	emit(descNBDRefused, float64(n.RefusedConnections))
	emit(descNBDTimeouts, float64(n.IdleTimeouts), "idle")
	emit(descNBDTimeouts, float64(n.IOTimeouts), "io")
	emit(descNBDInFlight, float64(n.InFlightBytes))
	for _, r := range []struct {
		cmd string
		v   int64
	}{
		{"read", n.Reads}, {"write", n.Writes}, {"flush", n.Flushes}, {"trim", n.Trims},
		{"cache", n.Caches}, {"write_zeroes", n.WriteZeroes}, {"disc", n.Disconnects}, {"block_status", n.BlockStatuses}, {"other", n.OtherCommands},
	} {
		emit(descNBDRequests, float64(r.v), r.cmd)
	}
	emit(descNBDReadBytes, float64(n.BytesRead))
	emit(descNBDSplicedBytes, float64(n.BytesSpliced))
	emit(descNBDWriteBytes, float64(n.BytesWritten))
	emit(descNBDStreamed, float64(n.BytesStreamed))
	emit(descNBDReceived, float64(n.BytesReceived))
	emit(descNBDErrors, float64(n.ErrorReplies))
}

// collectJobs emits the background job families of one array. An array
// that could not be assembled runs no job and has none.
func (c *statusCollector) collectJobs(emit func(desc, float64, ...string), a *arrayStatus) {
	if a.Error != "" {
		return
	}
	running := func(p *raid.Progress, kind string) {
		if p == nil {
			return
		}
		emit(descJobRatio, ratio(p), a.Name, kind)
		emit(descJobDone, float64(p.Done), a.Name, kind)
		emit(descJobPlanned, float64(p.Total), a.Name, kind)
	}
	for _, k := range recoveryJobs {
		emit(descJobRunning, bool01(a.Recovery != nil && a.Recovery.Kind == k), a.Name, k)
	}
	if r := a.Recovery; r != nil {
		running(r, r.Kind)
		emit(descJobMoved, float64(r.BytesMoved), a.Name, r.Kind)
		if r.ETASeconds > 0 {
			emit(descJobETA, r.ETASeconds, a.Name, r.Kind)
		}
	}
	emit(descJobRunning, bool01(a.Resync != nil), a.Name, "resync")
	running(a.Resync, "resync")
	emit(descJobRunning, bool01(a.Scrub != nil), a.Name, "scrub")
	if s := a.Scrub; s != nil {
		running(&s.Progress, "scrub")
		emit(descJobMoved, float64(s.BytesMoved), a.Name, "scrub")
		if s.ETASeconds > 0 {
			emit(descJobETA, s.ETASeconds, a.Name, "scrub")
		}
	}
	// The findings of the running scrub or, when none runs, the last one.
	if s := cmp.Or(a.Scrub, a.LastScrub); s != nil {
		emit(descScrubMismatches, float64(s.Mismatches), a.Name)
		emit(descScrubRepaired, float64(s.Repaired), a.Name)
	}
	if t := a.LastScrubFinished; !t.IsZero() {
		emit(descScrubFinished, float64(t.UnixNano())/1e9, a.Name)
	}
}

// collectCacheAndLog emits the stripe cache and write-hole journal
// families of an array that has them.
func collectCacheAndLog(emit func(desc, float64, ...string), a *arrayStatus) {
	if c := a.StripeCache; c != nil {
		emit(descCacheLimit, float64(c.Limit), a.Name)
		emit(descCacheBytes, float64(c.Bytes), a.Name)
		emit(descCacheStripes, float64(c.Stripes), a.Name)
		emit(descCacheFull, float64(c.FullStripeWrites), a.Name)
		emit(descCachePartial, float64(c.PartialWriteouts), a.Name)
		emit(descCacheBypassed, float64(c.Bypassed), a.Name)
	}
	if j := a.Journal; j != nil {
		emit(descLogArea, float64(j.AreaBytes), a.Name)
		emit(descLogRecords, float64(j.Records), a.Name)
		emit(descLogBytes, float64(j.BytesWritten), a.Name)
		emit(descLogCheckpts, float64(j.Checkpoints), a.Name)
		emit(descLogReplayed, float64(j.Replayed), a.Name)
	}
}

// ratio is a job's progress from 0 to 1; 1 when none runs.
func ratio(p *raid.Progress) float64 {
	if p == nil || p.Total == 0 {
		return 1
	}
	return float64(p.Done) / float64(p.Total)
}

func bool01(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// csumField reads one checksum counter of a, 0 for an array without
// checksums.
func csumField(a *arrayStatus, f func(*raid.ChecksumStatus) int64) float64 {
	if a.Checksums == nil {
		return 0
	}
	return float64(f(a.Checksums))
}
