package main

import (
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const nbdCmdTrim = 4

// scrape fetches /metrics from the control socket and parses it with the
// Prometheus text parser.
func scrape(t *testing.T, control string) families {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(httpGet(t, control, "/metrics")))
	require.NoError(t, err, "the exposition parses")
	return fams
}

// families are parsed metric families by name.
type families map[string]*dto.MetricFamily

// find returns the sample of family name whose labels include labels
// ("k=v" pairs), failing the test unless exactly one matches.
func (f families) find(t *testing.T, name string, labels ...string) *dto.Metric {
	t.Helper()
	fam, ok := f[name]
	require.True(t, ok, "family %s is exposed", name)
	var found []*dto.Metric
	for _, m := range fam.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for _, kv := range labels {
			k, v, _ := strings.Cut(kv, "=")
			match = match && have[k] == v
		}
		if match {
			found = append(found, m)
		}
	}
	require.Len(t, found, 1, "samples of %s%v", name, labels)
	return found[0]
}

// value returns the value of a gauge or counter sample.
func (f families) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	m := f.find(t, name, labels...)
	switch f[name].GetType() {
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	}
	t.Fatalf("%s is a %v", name, f[name].GetType())
	return 0
}

// TestMetrics parses /metrics with the Prometheus library's own parser
// and checks that the values follow I/O: the latency histograms of each
// operation, the byte counters, member state, per-member I/O errors, and
// rebuild progress.
func TestMetrics(t *testing.T) {
	e := newEnv(t)
	e.create(t, "data", "1", "a.img", "b.img")
	a, b := e.paths("a.img")[0], e.paths("b.img")[0]
	// A slow rebuild, so that its progress can be seen.
	cfg := e.config(t, "", e.array("data", "    rebuild_min_rate: 64KiB\n    rebuild_max_rate: 64KiB\n", "a.img", "b.img"))
	serve(t, cfg)

	f := scrape(t, e.control)
	assert.EqualValues(t, 7<<20, f.value(t, "raidd_array_size_bytes", "array=data"), "a name kept from before client_golang")
	assert.Zero(t, f.value(t, "raidd_array_client_written_bytes_total", "array=data"))
	for _, op := range []string{opRead, opWrite, opFlush, opTrim, opWriteZeroes} {
		h := f.find(t, "raidd_request_duration_seconds", "export=data", "operation="+op).GetHistogram()
		assert.Zero(t, h.GetSampleCount(), "%s before any request", op)
		assert.Len(t, h.GetBucket(), len(latencyBuckets)+1, "%s buckets and +Inf", op)
	}
	for _, p := range []string{a, b} {
		assert.EqualValues(t, 1, f.value(t, "raidd_member_state", "path="+p, "state=active"))
		assert.Zero(t, f.value(t, "raidd_member_state", "path="+p, "state=failed"), "every state has a series")
		assert.Zero(t, f.value(t, "raidd_member_io_errors_total", "path="+p, "operation=read"))
		assert.Zero(t, f.value(t, "raidd_member_repairs_total", "path="+p))
	}
	assert.Zero(t, f.value(t, "raidd_array_job_running", "array=data", "job=rebuild"))
	assert.Zero(t, f.value(t, "raidd_array_job_running", "array=data", "job=resync"))
	assert.NotContains(t, f, "raidd_array_job_progress_ratio", "no job runs")
	assert.NotContains(t, f, "raidd_array_stripe_cache_bytes", "a mirror has no stripe cache")
	assert.NotContains(t, f, "raidd_array_journal_records_total", "a mirror has no write-hole log")

	// Two rows (64 KiB chunks) of data, read back, flushed, trimmed.
	c := dialNBD(t, "unix", e.nbdSock, "data")
	c.mustDo(nbdCmdWrite, 0, pattern(128<<10, 5))
	c.mustDo(nbdCmdWrite, 1<<20, pattern(4096, 6))
	c.mustDo(nbdCmdRead, 0, make([]byte, 64<<10))
	c.mustDo(nbdCmdFlush, 0, nil)
	require.Zero(t, c.do(nbdCmdTrim, 1<<20, make([]byte, 4096)), "trim")

	f = scrape(t, e.control)
	for op, n := range map[string]uint64{opRead: 1, opWrite: 2, opFlush: 1, opTrim: 1, opWriteZeroes: 0} {
		h := f.find(t, "raidd_request_duration_seconds", "export=data", "operation="+op).GetHistogram()
		assert.Equal(t, n, h.GetSampleCount(), "%s requests timed", op)
		if n > 0 {
			assert.Positive(t, h.GetSampleSum(), "%s time", op)
			last := h.GetBucket()[len(latencyBuckets)-1] // the last finite bucket
			assert.Equal(t, n, last.GetCumulativeCount(), "every %s took under %gs", op, last.GetUpperBound())
		}
	}
	assert.EqualValues(t, 128<<10+4096, f.value(t, "raidd_array_client_written_bytes_total", "array=data"))
	assert.EqualValues(t, 64<<10, f.value(t, "raidd_array_client_read_bytes_total", "array=data"))
	assert.EqualValues(t, 2, f.value(t, "raidd_nbd_requests_total", "command=write"))
	assert.EqualValues(t, 1, f.value(t, "raidd_nbd_requests_total", "command=trim"))

	// b is cut short behind raidd's back: the next read of it fails, which
	// counts an I/O error on b and fails it.
	require.NoError(t, os.Truncate(b, 2<<20))
	c.mustDo(nbdCmdRead, 4<<20, make([]byte, 2<<20)) // a stretch on each copy
	f = scrape(t, e.control)
	assert.EqualValues(t, 1, f.value(t, "raidd_member_io_errors_total", "path="+b, "operation=read"))
	assert.Zero(t, f.value(t, "raidd_member_io_errors_total", "path="+a, "operation=read"))
	assert.EqualValues(t, 1, f.value(t, "raidd_member_state", "path="+b, "state=failed"))
	assert.Zero(t, f.value(t, "raidd_member_state", "path="+b, "state=active"))
	assert.EqualValues(t, 1, f.value(t, "raidd_array_degraded", "array=data"))

	// A spare is rebuilt at 64 KiB/s: the progress shows while it runs.
	spare := e.paths("spare.img")[0]
	require.NoError(t, os.WriteFile(spare, nil, 0o600))
	require.NoError(t, os.Truncate(spare, 8<<20))
	code, out, errOut := raidd(t, "add", "--control", e.control, "data", spare)
	require.Equal(t, 0, code, out+errOut)
	f = scrape(t, e.control)
	if f.value(t, "raidd_array_job_running", "array=data", "job=rebuild") == 1 {
		assert.EqualValues(t, 7<<20/(64<<10), f.value(t, "raidd_array_job_planned_rows", "array=data", "job=rebuild"))
		r := f.value(t, "raidd_array_job_progress_ratio", "array=data", "job=rebuild")
		assert.True(t, r >= 0 && r < 1, "progress %v", r)
		assert.EqualValues(t, 1, f.value(t, "raidd_member_state", "path="+spare, "state=rebuilding"))
	} else {
		t.Errorf("the rebuild of two 64 KiB rows at 64 KiB/s finished before the first scrape:\n%s", httpGet(t, e.control, "/metrics"))
	}
	waitFor(t, "the rebuild", func() bool {
		return scrape(t, e.control).value(t, "raidd_array_job_running", "array=data", "job=rebuild") == 0
	})
	f = scrape(t, e.control)
	assert.EqualValues(t, 1, f.value(t, "raidd_member_state", "path="+spare, "state=active"))
	assert.Zero(t, f.value(t, "raidd_array_degraded", "array=data"))
	assert.Positive(t, f.value(t, "raidd_array_rebuild_written_bytes_total", "array=data"))
	assert.Zero(t, f.value(t, "raidd_array_job_running", "array=data", "job=scrub"))
	assert.NotContains(t, f, "raidd_array_last_scrub_finished_timestamp_seconds", "no scrub has run")

	// A check (a scrub) runs to its end: its findings and time show.
	code, out, errOut = raidd(t, "check", "--control", e.control, "data")
	require.Equal(t, 0, code, out+errOut)
	f = scrape(t, e.control)
	assert.Zero(t, f.value(t, "raidd_array_scrub_mismatches", "array=data"))
	assert.Zero(t, f.value(t, "raidd_array_job_running", "array=data", "job=scrub"))
	assert.InDelta(t, float64(time.Now().Unix()), f.value(t, "raidd_array_last_scrub_finished_timestamp_seconds", "array=data"), 60)
}

// TestMetricsChecksums: an array created with --checksums has the checksum
// series, per array and per member, and `raidd status` shows them.
func TestMetricsChecksums(t *testing.T) {
	e := newEnv(t)
	args := append([]string{"create", "--name", "data", "--level", "1", "--chunk", "64KiB", "--size", "8MiB", "--checksums", "--log-level", "warn"}, e.paths("a.img", "b.img")...)
	code, out, errOut := raidd(t, args...)
	require.Equal(t, 0, code, "create: %s%s", out, errOut)
	cfg := e.config(t, "", e.array("data", "    checksum_cache: 1MiB\n", "a.img", "b.img"))
	serve(t, cfg)

	f := scrape(t, e.control)
	for _, name := range []string{"raidd_array_checksum_repaired_blocks_total", "raidd_array_checksum_lost_blocks_total", "raidd_array_checksum_pages_rebuilt_total"} {
		assert.Zero(t, f.value(t, name, "array=data"), name)
	}
	for _, p := range e.paths("a.img", "b.img") {
		assert.Zero(t, f.value(t, "raidd_member_checksum_repairs_total", "path="+p))
	}
	code, out, errOut = raidd(t, "status", "--control", e.control)
	require.Equal(t, 0, code, "status: %s%s", out, errOut)
	assert.Contains(t, out, "checksums: CRC32C per 4KiB block; 0 repaired, 0 lost")
	assert.Contains(t, out, "cache 0B of 1MiB", "nothing read yet; bounded by checksum_cache")
}

// TestMetricsStripeCacheAndJournal: a RAID5 has the stripe cache and
// write-hole journal series, and they follow the writes: a stripe written
// in two pieces goes out whole from the cache, and the pieces of two
// other stripes wait in the cache until FLUSH forces them out as partial
// write-outs: partial-stripe row writes, which the journal records.
func TestMetricsStripeCacheAndJournal(t *testing.T) {
	e := newEnv(t)
	e.create(t, "p", "5", "a.img", "b.img", "c.img", "d.img")
	// Partial stripes stay cached until FLUSH, however slow the machine.
	serve(t, e.config(t, "", e.array("p", "    stripe_cache_delay: 1h\n", "a.img", "b.img", "c.img", "d.img")))

	f := scrape(t, e.control)
	limit := f.value(t, "raidd_array_stripe_cache_limit_bytes", "array=p")
	assert.True(t, limit > 0 && limit <= 64<<20, "the default stripe_cache bounds the cache: %v", limit)
	assert.Positive(t, f.value(t, "raidd_array_journal_area_bytes", "array=p"))
	for _, name := range []string{"raidd_array_stripe_cache_bytes", "raidd_array_stripe_cache_full_writeouts_total",
		"raidd_array_stripe_cache_partial_writeouts_total", "raidd_array_journal_records_total",
		"raidd_array_journal_written_bytes_total", "raidd_array_journal_replayed_records"} {
		assert.Zero(t, f.value(t, name, "array=p"), name)
	}

	const width = 3 * 64 << 10 // a stripe of 4 members, 64 KiB chunks
	c := dialNBD(t, "unix", e.nbdSock, "p")
	c.mustDo(nbdCmdWrite, 0, pattern(64<<10, 1))        // starts a stripe: cached
	c.mustDo(nbdCmdWrite, 64<<10, pattern(128<<10, 2))  // completes it: out whole
	c.mustDo(nbdCmdWrite, width+8192, pattern(4096, 3)) // follows the last write's stripe: cached
	c.mustDo(nbdCmdWrite, 3*width, pattern(4096, 4))    // starts a stripe: cached
	f = scrape(t, e.control)
	assert.EqualValues(t, 1, f.value(t, "raidd_array_stripe_cache_full_writeouts_total", "array=p"))
	assert.EqualValues(t, 2, f.value(t, "raidd_array_stripe_cache_stripes", "array=p"), "the last pieces wait in the cache")
	assert.Positive(t, f.value(t, "raidd_array_stripe_cache_bytes", "array=p"))
	c.mustDo(nbdCmdFlush, 0, nil)
	f = scrape(t, e.control)
	assert.EqualValues(t, 2, f.value(t, "raidd_array_stripe_cache_partial_writeouts_total", "array=p"), "FLUSH wrote the cached pieces")
	assert.Zero(t, f.value(t, "raidd_array_stripe_cache_stripes", "array=p"))
	assert.Zero(t, f.value(t, "raidd_array_stripe_cache_bytes", "array=p"))
	assert.GreaterOrEqual(t, f.value(t, "raidd_array_journal_records_total", "array=p"), 2.0, "both partial row writes were recorded")
	assert.Positive(t, f.value(t, "raidd_array_journal_written_bytes_total", "array=p"))
}
