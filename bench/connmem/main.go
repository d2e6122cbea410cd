// Command connmem is the connection-memory soak behind bench/conn-memory.sh.
// It attacks a running NBD server (raidd) with the connection patterns of
// issue 7 while sampling the server's resident memory from /proc/PID/status,
// and exits 1 if the peak (VmHWM) exceeds -limit.
//
// The phases, each -phase long, run one after the other:
//
//   - write-trickle: -writers connections each send 32 MiB WRITE requests
//     (-payload) whose payload trickles in at no more than -rate bytes per
//     second (64 KiB, then a pause), and read their replies. A server that allocates the payload buffer when
//     the header arrives holds writers x payload bytes.
//   - read-no-drain: -readers connections each send -reads READ requests of
//     -payload bytes and never read a reply (one more READ header every
//     second detects a server-side close). A server that reads the data
//     before its reply can be written holds the data until the client reads.
//   - idle-conns: -idle connections complete the handshake and then say
//     nothing; with a connection limit the extra ones are refused.
//
// A probe connection writes and reads back 4 KiB every 200 ms throughout,
// and its latency is reported per phase: it shows whether ordinary clients
// are served while the attack runs. Attackers whose connection is closed by
// the server reconnect, as a real attacker would.
//
// Every attacking connection is a real NBD client (fixed newstyle handshake,
// NBD_OPT_GO, simple replies), so the server cannot tell it from a slow one.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "connmem:", err)
		os.Exit(2)
	}
}

type config struct {
	addr, export            string
	pid                     int
	payload, rate, region   int64
	writers, readers, reads int
	idle                    int
	phase                   time.Duration
	limit, abortAbove       int64
	mixed                   bool
}

// size returns the length of a connection's i-th request: -payload, or
// with -mixed -payload/2^(i mod 6), so that requests of one connection
// cycle through six buffer size classes.
func (c config) size(i int) int64 {
	if c.mixed {
		return max(c.payload>>(i%6), 4096)
	}
	return c.payload
}

func run() error {
	var c config
	var payload, rate, region, limit, abort string
	flag.StringVar(&c.addr, "addr", "127.0.0.1:10809", "NBD server: host:port or unix:PATH")
	flag.StringVar(&c.export, "export", "", "export name")
	flag.IntVar(&c.pid, "pid", 0, "PID of the server process whose memory is sampled (required)")
	flag.StringVar(&payload, "payload", "32MiB", "WRITE and READ request size")
	flag.StringVar(&rate, "rate", "2MiB", "bytes per second each trickling writer sends")
	flag.StringVar(&region, "region", "128MiB", "requests address the first REGION bytes of the export")
	flag.IntVar(&c.writers, "writers", 50, "trickling writer connections")
	flag.IntVar(&c.readers, "readers", 50, "connections whose READ replies are never read")
	flag.IntVar(&c.reads, "reads", 16, "READ requests each non-draining reader sends at once")
	flag.BoolVar(&c.mixed, "mixed", false, "cycle request sizes through -payload, -payload/2, ... -payload/32")
	flag.IntVar(&c.idle, "idle", 300, "connections opened in the idle-conns phase (0 skips it)")
	flag.DurationVar(&c.phase, "phase", 40*time.Second, "duration of each phase")
	flag.StringVar(&limit, "limit", "256MiB", "fail if the server's VmHWM exceeds this")
	flag.StringVar(&abort, "abort-above", "6GiB", "stop a phase early once VmRSS exceeds this (protects the machine)")
	flag.Parse()
	if c.pid <= 0 {
		return errors.New("-pid is required")
	}
	for _, s := range []struct {
		v   string
		dst *int64
	}{{payload, &c.payload}, {rate, &c.rate}, {region, &c.region}, {limit, &c.limit}, {abort, &c.abortAbove}} {
		n, err := parseSize(s.v)
		if err != nil {
			return err
		}
		*s.dst = n
	}
	if c.payload <= 0 || c.payload > 1<<31 || c.rate <= 0 || c.region < c.payload {
		return errors.New("need 0 < -payload <= 2GiB <= ..., -rate > 0 and -region >= -payload")
	}

	size, err := probeSize(c)
	if err != nil {
		return fmt.Errorf("first connection: %w", err)
	}
	if size < c.region+1<<20 {
		return fmt.Errorf("export is %d bytes; need at least -region + 1 MiB", size)
	}

	m := &monitor{pid: c.pid, abortAbove: c.abortAbove}
	base, err := m.sample()
	if err != nil {
		return err
	}
	fmt.Printf("server pid %d, export %d bytes; before the attack: VmRSS %s, VmHWM %s\n",
		c.pid, size, mib(base.rss), mib(base.hwm))
	stopMon := m.start()
	defer stopMon()

	pr := &probe{c: c, off: c.region}
	probeCtx, stopProbe := context.WithCancel(context.Background())
	probeDone := make(chan struct{})
	go func() { pr.run(probeCtx); close(probeDone) }()

	type result struct {
		name        string
		peakRSS     int64
		st          *phaseStats
		lat         []time.Duration
		probeErrors int64
		aborted     bool
	}
	var results []result
	phases := []struct {
		name string
		on   bool
		run  func(ctx context.Context, st *phaseStats)
	}{
		{"write-trickle", c.writers > 0, func(ctx context.Context, st *phaseStats) { attack(ctx, c, c.writers, st, writer) }},
		{"read-no-drain", c.readers > 0, func(ctx context.Context, st *phaseStats) { attack(ctx, c, c.readers, st, reader) }},
		{"idle-conns", c.idle > 0, func(ctx context.Context, st *phaseStats) { idlePhase(ctx, c, st) }},
	}
	for _, ph := range phases {
		if !ph.on {
			continue
		}
		fmt.Printf("phase %s: %s ...\n", ph.name, c.phase)
		m.resetPhase()
		pr.reset()
		ctx, cancel := context.WithTimeout(context.Background(), c.phase)
		m.setCancel(cancel)
		st := new(phaseStats)
		ph.run(ctx, st)
		cancel()
		lat, perr := pr.reset()
		results = append(results, result{ph.name, m.phasePeak(), st, lat, perr, m.wasAborted()})
		time.Sleep(2 * time.Second) // let the server notice the closed connections
	}
	stopProbe()
	<-probeDone
	stopMon()
	end, err := m.sample()
	if err != nil {
		return err
	}

	fmt.Println()
	fmt.Printf("%-14s %12s %9s %9s %9s %9s %9s %12s %12s %7s\n", "phase", "peak VmRSS", "conns", "refused", "dropped", "done", "errors", "probe p50", "probe max", "p.errs")
	for i := range results {
		r := &results[i]
		p50, pmax := "-", "-"
		if len(r.lat) > 0 {
			slices.Sort(r.lat)
			p50 = r.lat[len(r.lat)/2].Round(time.Millisecond).String()
			pmax = r.lat[len(r.lat)-1].Round(time.Millisecond).String()
		}
		peak := mib(r.peakRSS)
		if r.aborted {
			peak = ">" + peak
		}
		fmt.Printf("%-14s %12s %9d %9d %9d %9d %9d %12s %12s %7d\n", r.name, peak,
			r.st.conns.Load(), r.st.refused.Load(), r.st.dropped.Load(), r.st.done.Load(), r.st.errors.Load(), p50, pmax, r.probeErrors)
	}
	fmt.Println()
	fmt.Printf("server VmHWM %s (limit %s), VmRSS now %s\n", mib(end.hwm), mib(c.limit), mib(end.rss))
	fmt.Println("conns: connections that completed the handshake; refused: handshakes the server refused or closed;")
	fmt.Println("dropped: established connections the server closed; done: WRITEs acknowledged; errors: error replies")
	m.mu.Lock()
	anyAbort := m.anyAbort
	m.mu.Unlock()
	if end.hwm > c.limit || anyAbort {
		fmt.Printf("FAIL: server peak RSS %s exceeds %s\n", mib(end.hwm), mib(c.limit))
		os.Exit(1)
	}
	fmt.Println("PASS: server peak RSS within the limit")
	return nil
}

// ---- memory monitor ----

type memSample struct{ rss, hwm int64 }

type monitor struct {
	pid        int
	abortAbove int64

	mu       sync.Mutex
	peak     int64
	aborted  bool // in this phase
	anyAbort bool // in any phase
	cancel   func()
}

func (m *monitor) sample() (memSample, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", m.pid))
	if err != nil {
		return memSample{}, err
	}
	var s memSample
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kib, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			s.rss = kib << 10
		case "VmHWM:":
			s.hwm = kib << 10
		}
	}
	return s, nil
}

// start samples every 50 ms until the returned function is called.
func (m *monitor) start() func() {
	done := make(chan struct{})
	var once sync.Once
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			s, err := m.sample()
			if err != nil {
				continue // the server exited; the final sample reports it
			}
			m.mu.Lock()
			m.peak = max(m.peak, s.rss)
			if s.rss > m.abortAbove && !m.aborted {
				m.aborted, m.anyAbort = true, true
				fmt.Printf("  VmRSS %s is above %s: stopping this phase early\n", mib(s.rss), mib(m.abortAbove))
				if m.cancel != nil {
					m.cancel()
				}
			}
			m.mu.Unlock()
		}
	}()
	return func() { once.Do(func() { close(done) }) }
}

func (m *monitor) resetPhase() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.peak, m.aborted = 0, false
}

func (m *monitor) setCancel(f func()) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cancel = f
}

func (m *monitor) phasePeak() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peak
}

func (m *monitor) wasAborted() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.aborted
}

// ---- attackers ----

type phaseStats struct {
	conns, refused, dropped, done, errors atomic.Int64
}

// attack runs n copies of pattern until ctx ends; each reconnects when the
// server closes its connection.
func attack(ctx context.Context, c config, n int, st *phaseStats, pattern func(context.Context, config, int, *nbdConn, *phaseStats) error) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				nc, err := dialNBD(c)
				if err != nil {
					st.refused.Add(1)
					sleepCtx(ctx, 200*time.Millisecond)
					continue
				}
				st.conns.Add(1)
				stop := context.AfterFunc(ctx, func() { _ = nc.c.Close() })
				err = pattern(ctx, c, i, nc, st)
				stop()
				_ = nc.c.Close()
				if ctx.Err() == nil && err != nil {
					st.dropped.Add(1)
					sleepCtx(ctx, 100*time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
}

// writer sends WRITE requests whose payload trickles at c.rate, and reads
// the replies on another goroutine.
func writer(ctx context.Context, c config, id int, nc *nbdConn, st *phaseStats) error {
	replyErr := make(chan error, 1)
	go func() {
		for {
			_, errno, err := nc.readSimpleReply()
			if err != nil {
				replyErr <- err
				return
			}
			if errno != 0 {
				st.errors.Add(1)
			} else {
				st.done.Add(1)
			}
		}
	}()
	slots := c.region / c.payload
	chunk := make([]byte, 64<<10)
	for i := 0; ctx.Err() == nil; i++ {
		off := ((int64(id) + int64(i)) % slots) * c.payload
		size := c.size(id + i)
		if err := nc.sendRequest(cmdWrite, uint64(i), uint64(off), uint32(size)); err != nil {
			return err
		}
		for sent := int64(0); sent < size; {
			n := min(int64(len(chunk)), size-sent)
			if _, err := nc.c.Write(chunk[:n]); err != nil {
				return err
			}
			sent += n
			// A strict trickle: time spent blocked (the server not
			// reading) is not made up for afterwards.
			if !sleepCtx(ctx, time.Duration(float64(n)/float64(c.rate)*float64(time.Second))) {
				return nil
			}
			select {
			case err := <-replyErr:
				return err
			default:
			}
		}
	}
	return nil
}

// reader sends c.reads READ requests and never reads a reply. One more
// READ header every second notices when the server has closed the
// connection (the write fails).
func reader(ctx context.Context, c config, id int, nc *nbdConn, st *phaseStats) error {
	slots := c.region / c.payload
	for i := 0; ctx.Err() == nil; i++ {
		off := ((int64(id) + int64(i)) % slots) * c.payload
		if err := nc.sendRequest(cmdRead, uint64(i), uint64(off), uint32(c.size(id+i))); err != nil {
			return err
		}
		if i >= c.reads && !sleepCtx(ctx, time.Second) {
			return nil
		}
	}
	return nil
}

// idlePhase opens c.idle connections that complete the handshake and then
// wait, holding them until ctx ends.
func idlePhase(ctx context.Context, c config, st *phaseStats) {
	var (
		mu    sync.Mutex
		conns []*nbdConn
		wg    sync.WaitGroup
	)
	sem := make(chan struct{}, 32) // handshakes at once
	for range c.idle {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			nc, err := dialNBD(c)
			if err != nil {
				st.refused.Add(1)
				return
			}
			st.conns.Add(1)
			mu.Lock()
			conns = append(conns, nc)
			mu.Unlock()
		}()
	}
	wg.Wait()
	<-ctx.Done()
	for _, nc := range conns {
		_ = nc.c.Close()
	}
}

// ---- probe ----

// probe writes 4 KiB at off and reads it back every 200 ms, recording the
// latency of each round trip.
type probe struct {
	c   config
	off int64

	mu     sync.Mutex
	lat    []time.Duration
	errors int64
}

func (p *probe) reset() ([]time.Duration, int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	l, e := p.lat, p.errors
	p.lat, p.errors = nil, 0
	return l, e
}

func (p *probe) run(ctx context.Context) {
	var nc *nbdConn
	defer func() {
		if nc != nil {
			_ = nc.c.Close()
		}
	}()
	buf := make([]byte, 4096)
	for i := 0; ctx.Err() == nil; i++ {
		if !sleepCtx(ctx, 200*time.Millisecond) {
			return
		}
		start := time.Now()
		err := func() error {
			if nc == nil {
				var err error
				if nc, err = dialNBD(p.c); err != nil {
					return err
				}
			}
			stop := context.AfterFunc(ctx, func() { _ = nc.c.Close() })
			defer stop()
			_ = nc.c.SetDeadline(time.Now().Add(5 * time.Minute))
			for j := range buf {
				buf[j] = byte(i + j)
			}
			if err := nc.sendRequest(cmdWrite, 1, uint64(p.off), uint32(len(buf))); err != nil {
				return err
			}
			if _, err := nc.c.Write(buf); err != nil {
				return err
			}
			if _, errno, err := nc.readSimpleReply(); err != nil || errno != 0 {
				return fmt.Errorf("probe write: errno %d, %v", errno, err)
			}
			if err := nc.sendRequest(cmdRead, 2, uint64(p.off), uint32(len(buf))); err != nil {
				return err
			}
			if _, errno, err := nc.readSimpleReply(); err != nil || errno != 0 {
				return fmt.Errorf("probe read: errno %d, %v", errno, err)
			}
			got := make([]byte, len(buf))
			if _, err := io.ReadFull(nc.br, got); err != nil {
				return err
			}
			if string(got) != string(buf) {
				return errors.New("probe read back different data")
			}
			return nil
		}()
		if ctx.Err() != nil {
			return
		}
		p.mu.Lock()
		if err != nil {
			p.errors++
			if nc != nil {
				_ = nc.c.Close()
				nc = nil
			}
		} else {
			p.lat = append(p.lat, time.Since(start))
		}
		p.mu.Unlock()
	}
}

// ---- minimal NBD client ----

const (
	magicInitPasswd  = 0x4e42444d41474943
	magicIHaveOpt    = 0x49484156454f5054
	magicOptReply    = 0x3e889045565a9
	magicRequest     = 0x25609513
	magicSimpleReply = 0x67446698
	optGo            = 7
	repAck           = 1
	repInfo          = 3
	infoExport       = 0
	cmdRead          = 0
	cmdWrite         = 1
)

type nbdConn struct {
	c    net.Conn
	br   *bufio.Reader
	size int64
	hdr  [28]byte
}

func dialNBD(c config) (*nbdConn, error) {
	network, addr := "tcp", c.addr
	if p, ok := strings.CutPrefix(c.addr, "unix:"); ok {
		network, addr = "unix", p
	}
	conn, err := net.DialTimeout(network, addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	nc := &nbdConn{c: conn, br: bufio.NewReaderSize(conn, 64<<10)}
	if err := nc.handshake(c.export); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return nc, nil
}

func (nc *nbdConn) handshake(export string) error {
	_ = nc.c.SetDeadline(time.Now().Add(10 * time.Second))
	defer func() { _ = nc.c.SetDeadline(time.Time{}) }()
	var hello [18]byte
	if _, err := io.ReadFull(nc.br, hello[:]); err != nil {
		return fmt.Errorf("greeting: %w", err)
	}
	if binary.BigEndian.Uint64(hello[0:]) != magicInitPasswd || binary.BigEndian.Uint64(hello[8:]) != magicIHaveOpt {
		return errors.New("not a fixed newstyle NBD server")
	}
	b := binary.BigEndian.AppendUint32(nil, 3) // FIXED_NEWSTYLE | NO_ZEROES
	b = binary.BigEndian.AppendUint64(b, magicIHaveOpt)
	b = binary.BigEndian.AppendUint32(b, optGo)
	b = binary.BigEndian.AppendUint32(b, uint32(4+len(export)+2))
	b = binary.BigEndian.AppendUint32(b, uint32(len(export)))
	b = append(b, export...)
	b = binary.BigEndian.AppendUint16(b, 0)
	if _, err := nc.c.Write(b); err != nil {
		return err
	}
	for {
		var h [20]byte
		if _, err := io.ReadFull(nc.br, h[:]); err != nil {
			return fmt.Errorf("option reply: %w", err)
		}
		if binary.BigEndian.Uint64(h[0:]) != magicOptReply {
			return errors.New("bad option reply magic")
		}
		typ := binary.BigEndian.Uint32(h[12:])
		data := make([]byte, binary.BigEndian.Uint32(h[16:]))
		if _, err := io.ReadFull(nc.br, data); err != nil {
			return err
		}
		switch {
		case typ == repAck:
			return nil
		case typ == repInfo && len(data) >= 12 && binary.BigEndian.Uint16(data) == infoExport:
			nc.size = int64(binary.BigEndian.Uint64(data[2:]))
		case typ&(1<<31) != 0:
			return fmt.Errorf("NBD_OPT_GO refused (%#x): %s", typ, data)
		}
	}
}

func (nc *nbdConn) sendRequest(typ uint16, handle, off uint64, length uint32) error {
	b := nc.hdr[:]
	binary.BigEndian.PutUint32(b[0:], magicRequest)
	binary.BigEndian.PutUint16(b[4:], 0)
	binary.BigEndian.PutUint16(b[6:], typ)
	binary.BigEndian.PutUint64(b[8:], handle)
	binary.BigEndian.PutUint64(b[16:], off)
	binary.BigEndian.PutUint32(b[24:], length)
	_, err := nc.c.Write(b)
	return err
}

// readSimpleReply reads one simple reply header (not the READ data).
func (nc *nbdConn) readSimpleReply() (handle uint64, errno uint32, err error) {
	var h [16]byte
	if _, err := io.ReadFull(nc.br, h[:]); err != nil {
		return 0, 0, err
	}
	if binary.BigEndian.Uint32(h[0:]) != magicSimpleReply {
		return 0, 0, errors.New("bad reply magic")
	}
	return binary.BigEndian.Uint64(h[8:]), binary.BigEndian.Uint32(h[4:]), nil
}

func probeSize(c config) (int64, error) {
	nc, err := dialNBD(c)
	if err != nil {
		return 0, err
	}
	defer nc.c.Close()
	return nc.size, nil
}

// ---- helpers ----

// sleepCtx sleeps for d (if positive) and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func parseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		m      int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			s, mult = v, u.m
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad size %q", s)
	}
	return n * mult, nil
}

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
