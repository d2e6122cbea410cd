package tests

import (
	"bufio"
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// guestInit is the guest's /init: it runs the scenarios and reports them.
//
//go:embed guest/init.sh
var guestInit []byte

// nbdUnit is the attach-at-boot unit whose commands the guest runs.
const nbdUnit = "contrib/systemd/raidd-nbd@.service"

// kernelTimeout bounds one boot of the guest, scenarios included. It is a
// hang guard, not a performance bound: the run's times are logged.
const kernelTimeout = 10 * time.Minute

// kernelQuiet is how long the guest may stay silent before the test logs
// raidd's view of the NBD connections (no step takes that long normally).
const kernelQuiet = 20 * time.Second

// kernelScenarios lists, in the order the guest runs them, every step each
// array must report; a step missing from the guest's report fails.
var kernelScenarios = []struct {
	name  string
	steps []string
}{
	{"attach", []string{"nbd-client", "size", "discard", "write_cache", "fua", "block_size"}},
	{"fs", []string{"mkfs", "mount", "write_fsync", "fstrim", "umount", "drop_caches", "fsck", "remount", "reread"}},
	{"rebuild", []string{"writing", "host_rebuilt", "writer_ok", "drop_caches", "reread", "no_io_errors", "umount", "fsck", "host_check", "remount"}},
	{"crash", []string{"write_fsync", "umount_dead", "detach", "reattach", "mount", "reread", "umount", "fsck"}},
	{"detach", []string{"nbd-client", "disconnected"}},
}

// kernelGlobalSteps are the steps reported once, not per array.
var kernelGlobalSteps = map[string][]string{
	"guest": {"boot/up"},
	"all":   {"attach/host_connections", "crash/host_kill_restart", "detach/host_connections"},
}

// stepResult is one RAIDD-STEP line (or a host-side step).
type stepResult struct {
	ok     bool
	detail string
	at     time.Duration // since QEMU started
}

// kernelRun is the host side of one guest boot.
type kernelRun struct {
	t       *testing.T
	start   time.Time
	cfg     string
	port    int
	arrays  []*array
	byName  map[string]*array
	conns   int // NBD connections per attached device (the unit's -C)
	mu      sync.Mutex
	srv     *server
	steps   map[string]stepResult // "array/scenario/step"
	order   []string
	ended   bool
	handler sync.WaitGroup
	wmu     sync.Mutex
	ctl     net.Conn
}

// TestKernel boots a Linux guest under QEMU (TCG) whose kernel attaches
// RAID1, RAID5, RAID10 and RAID6 exports of one raidd as /dev/nbd0..3 with
// the command lines of contrib/systemd/raidd-nbd@.service, then runs on
// each: the flags the kernel saw; ext4 made, written, trimmed, checked and
// reread; a member failed and a spare rebuilt under writes while mounted;
// raidd killed with SIGKILL after fsync and restarted, the devices
// reattached and the data and file system checked; and detach. Every step
// the guest reports is a subtest. Without QEMU or a kernel it skips, or
// fails when RAIDD_REQUIRE_KERNEL=1 (scripts/test.sh sets it).
func TestKernel(t *testing.T) {
	env, err := findKernelEnv()
	if err != nil {
		if os.Getenv("RAIDD_REQUIRE_KERNEL") == "1" {
			t.Fatalf("RAIDD_REQUIRE_KERNEL=1: %v", err)
		}
		t.Skipf("kernel tests skipped: %v", err)
	}
	requireBinary(t)
	if _, err := exec.LookPath("nbdinfo"); err != nil {
		if os.Getenv("RAIDD_REQUIRE_KERNEL") == "1" {
			t.Fatalf("RAIDD_REQUIRE_KERNEL=1: nbdinfo (libnbd-bin) reads the flags the kernel must see: %v", err)
		}
		t.Skipf("kernel tests skipped: nbdinfo not installed (apt-get install libnbd-bin): %v", err)
	}
	unit, err := os.ReadFile(filepath.Join(repoRoot, nbdUnit))
	require.NoError(t, err)

	r := &kernelRun{t: t, byName: map[string]*array{}, steps: map[string]stepResult{}}
	var names []string
	for _, lc := range []levelCase{{"1", 2}, {"5", 3}, {"10", 4}, {"6", 4}} {
		a := createArray(t, lc.level, lc.members, testChunk)
		r.arrays = append(r.arrays, a)
		r.byName[a.name] = a
		names = append(names, a.name)
	}
	r.cfg = filepath.Join(t.TempDir(), "raidd.yaml")
	require.NoError(t, r.writeConfig())
	r.port = freeTCPPort(t)
	r.srv = r.serve()

	// The guest's configuration: per array its device, the unit's
	// commands for it, and what the kernel must show.
	var conf strings.Builder
	fmt.Fprintf(&conf, "ARRAYS='%s'\n", strings.Join(names, " "))
	for i, a := range r.arrays {
		dev := fmt.Sprintf("nbd%d", i)
		envFile := fmt.Sprintf("NBD_EXPORT=%s\nNBD_HOST=10.0.2.2\nNBD_PORT=%d\n", a.name, r.port)
		uc, err := expandUnit(unit, dev, envFile)
		require.NoError(t, err, "%s", nbdUnit)
		t.Logf("%s instance %s: ExecStart=%s ExecStop=%s", nbdUnit, dev, strings.Join(uc.start, " "), strings.Join(uc.stop, " "))
		conns, bs := nbdClientArgs(t, uc.start)
		r.conns = conns
		adv := advertised(t, r.srv.uri(a.name))
		require.Zero(t, int64(bs)%adv.BlockMin, "the unit's block size %d is a multiple of the advertised minimum %d", bs, adv.BlockMin)
		require.LessOrEqual(t, int64(bs), adv.BlockMax, "the unit's block size is at most the advertised maximum")
		fmt.Fprintf(&conf, "DEV_%s=%s\nSIZE_%s=%d\nTRIM_%s=%d\nFLUSH_%s=%d\nFUA_%s=%d\nBS_%s=%d\n",
			a.name, dev, a.name, adv.Size/512*512, a.name, b2i(adv.CanTrim), a.name, b2i(adv.CanFlush), a.name, b2i(adv.CanFUA), a.name, bs)
		fmt.Fprintf(&conf, "attach_%s() { %s; }\ndetach_%s() { %s; }\n", a.name, shellQuote(uc.start), a.name, shellQuote(uc.stop))
	}

	dir := shortTempDir(t)
	initrd := filepath.Join(dir, "initrd.cpio")
	require.NoError(t, buildInitramfs(env, initrd, guestInit, []byte(conf.String())))
	ctlPath := filepath.Join(dir, "ctl.sock")
	ln, err := net.Listen("unix", ctlPath)
	require.NoError(t, err)
	defer ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), kernelTimeout)
	defer cancel()
	console := &logWriter{t: t, prefix: "guest: "}
	qemu := exec.CommandContext(ctx, env.qemu,
		"-accel", "tcg", "-m", "512", "-smp", "2",
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-kernel", env.kernel, "-initrd", initrd,
		"-append", "console=ttyS0 quiet panic=-1 mitigations=off",
		"-serial", "stdio",
		"-chardev", "socket,id=ctl,path="+ctlPath, "-serial", "chardev:ctl",
		"-netdev", "user,id=n", "-device", "virtio-net-pci,netdev=n")
	qemu.Stdout, qemu.Stderr = console, console
	r.start = time.Now()
	require.NoError(t, qemu.Start())
	qemuDone := make(chan error, 1)
	go func() { qemuDone <- qemu.Wait() }()

	type acceptRes struct {
		c   net.Conn
		err error
	}
	acc := make(chan acceptRes, 1)
	go func() { c, err := ln.Accept(); acc <- acceptRes{c, err} }()
	select {
	case a := <-acc:
		require.NoError(t, a.err)
		r.ctl = a.c
	case err := <-qemuDone:
		console.flush()
		require.FailNow(t, "QEMU exited before connecting its control port", "%v", err)
	}
	defer r.ctl.Close()

	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(r.ctl)
		for sc.Scan() {
			lines <- strings.TrimSpace(sc.Text())
		}
		close(lines)
	}()
	// A guest silent for kernelQuiet once booted gets the host's side of
	// its NBD connections logged once, to tell a request raidd holds from
	// one that never reached it.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, logged := time.Now(), true // armed by the first line, after the boot
recv:
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				break recv
			}
			last, logged = time.Now(), false
			r.handle(line)
		case <-tick.C:
			if !logged && time.Since(last) > kernelQuiet {
				logged = true
				r.logStall(time.Since(last))
			}
		}
	}
	qerr := <-qemuDone
	console.flush()
	r.handler.Wait()
	total := time.Since(r.start)
	require.NoError(t, ctx.Err(), "the guest did not finish within %v", kernelTimeout)
	assert.NoError(t, qerr, "QEMU")
	assert.True(t, r.ended, "the guest reported RAIDD-END (it ran every scenario)")

	// After the guest: the arrays are whole, and consistent.
	for _, a := range r.arrays {
		pollUntil(t, 60*time.Second, a.name+" has no resync or rebuild running", func() bool {
			st := r.cur().fullStatus(t, a.name)
			return st.Resync == nil && st.Recovery == nil
		})
		st := r.cur().fullStatus(t, a.name)
		assert.False(t, st.Degraded || st.Failed, "%s after the guest: %s", a.name, st.State)
		out, errOut, code := raidd(t, "check", "--control", r.cur().ctrl, a.name)
		r.record(a.name+"/after/host_check", code == 0, strings.TrimSpace(out+errOut))
	}
	r.report()
	r.timings(total)
	// The kernel gives a request -t seconds, then sends it again on another
	// connection. That is no error to the guest, but a request that took
	// that long is worth a look: say so in the log.
	for _, l := range strings.Split(console.String(), "\n") {
		if strings.Contains(l, "Connection timed out, retrying") {
			t.Logf("NOTE: the guest kernel retried a request after the unit's request timeout: %s", strings.TrimSpace(l))
		}
	}
	srv := r.cur()
	srv.stopOK(t)
	for _, a := range r.arrays {
		assertClean(t, a.current()...)
	}
}

// logStall logs raidd's NBD counters and the host's TCP sockets of the
// guest's connections (queued bytes in either direction).
func (r *kernelRun) logStall(quiet time.Duration) {
	out, _ := exec.Command(raiddBin, "status", "--json", "--control", r.cur().ctrl).Output()
	var st struct {
		NBD json.RawMessage `json:"nbd"`
	}
	_ = json.Unmarshal(out, &st)
	ss, err := exec.Command("ss", "-tnoi", fmt.Sprintf("( sport = :%d )", r.port)).CombinedOutput()
	r.t.Logf("the guest has been silent for %v; raidd's NBD counters: %s\nss (err %v):\n%s", quiet.Round(time.Second), st.NBD, err, ss)
}

// spare is the member that replaced role 1 in the rebuild scenario.
func (a *array) spare() string {
	p := filepath.Join(filepath.Dir(a.members[0]), "spare.img")
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// freeTCPPort returns a loopback TCP port that was free a moment ago.
func freeTCPPort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// nbdClientArgs returns the connection count (-C) and block size (-b) of
// an nbd-client command line: what the kernel must show.
func nbdClientArgs(t *testing.T, argv []string) (conns, bs int) {
	conns, bs = 1, 512
	for i := 1; i+1 < len(argv); i++ {
		var err error
		switch argv[i] {
		case "-C", "-connections":
			conns, err = strconv.Atoi(argv[i+1])
		case "-b", "-block-size":
			bs, err = strconv.Atoi(argv[i+1])
		}
		require.NoError(t, err, "%v", argv)
	}
	return conns, bs
}

// exportInfo is what nbdinfo --json reports of an export.
type exportInfo struct {
	Size     int64 `json:"export-size"`
	CanTrim  bool  `json:"can_trim"`
	CanFlush bool  `json:"can_flush"`
	CanFUA   bool  `json:"can_fua"`
	BlockMin int64 `json:"block_size_minimum"`
	BlockMax int64 `json:"block_size_maximum"`
}

// advertised returns what raidd advertises for the export at uri.
func advertised(t *testing.T, uri string) exportInfo {
	out := mustRun(t, "nbdinfo", "--json", uri)
	var v struct {
		Exports []exportInfo `json:"exports"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &v), "nbdinfo --json:\n%s", out)
	require.Len(t, v.Exports, 1, "nbdinfo --json:\n%s", out)
	e := v.Exports[0]
	if e.BlockMin == 0 {
		e.BlockMin = 1
	}
	if e.BlockMax == 0 {
		e.BlockMax = 32 << 20
	}
	return e
}

// writeConfig writes raidd's configuration: every array with its current
// members (the spare in role 1 once the rebuild scenario added it). Until
// then the rebuild rate is capped, so that a rebuild lasts long enough for
// the guest's writes to overlap it; after it, the resync that follows the
// crash runs at full speed.
func (r *kernelRun) writeConfig() error {
	var b strings.Builder
	b.WriteString("shutdown_timeout: 5s\narrays:\n")
	for _, a := range r.arrays {
		fmt.Fprintf(&b, "  - name: %s\n    members: [%s]\n", a.name, strings.Join(a.current(), ", "))
		if a.spare() == "" {
			b.WriteString("    rebuild_min_rate: 512KiB\n    rebuild_max_rate: 512KiB\n")
		}
	}
	return os.WriteFile(r.cfg, []byte(b.String()), 0o600)
}

// current returns the array's members, with the spare in role 1 once the
// rebuild scenario has added one.
func (a *array) current() []string {
	if a.spare() == "" {
		return a.members
	}
	return append([]string{a.members[0], a.spare()}, a.members[2:]...)
}

// serve starts raidd with every array, on a unix socket and on the TCP
// port the guest reaches as 10.0.2.2.
func (r *kernelRun) serve() *server {
	return serve(r.t, "--config", r.cfg, "--listen", fmt.Sprintf("127.0.0.1:%d", r.port))
}

func (r *kernelRun) cur() *server {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srv
}

func (r *kernelRun) record(key string, ok bool, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.steps[key]; !dup {
		r.order = append(r.order, key)
	} else {
		ok, detail = false, "reported twice; last: "+detail
	}
	r.steps[key] = stepResult{ok: ok, detail: detail, at: time.Since(r.start)}
}

// answer sends the host's answer to the guest's request token.
func (r *kernelRun) answer(token string, err error) {
	r.wmu.Lock()
	defer r.wmu.Unlock()
	msg := token + " ok\n"
	if err != nil {
		msg = token + " FAIL " + strings.ReplaceAll(err.Error(), "\n", " ") + "\n"
	}
	if _, werr := r.ctl.Write([]byte(msg)); werr != nil {
		r.t.Errorf("answering %s: %v", token, werr)
	}
}

// handle acts on one line from the guest's control port.
func (r *kernelRun) handle(line string) {
	r.t.Logf("guest control at %v: %s", time.Since(r.start).Round(time.Millisecond), line)
	f := strings.Fields(line)
	switch {
	case len(f) >= 5 && f[0] == "RAIDD-STEP":
		detail := ""
		if i := strings.Index(line, " "+f[4]); i >= 0 {
			detail = strings.TrimSpace(line[i+1+len(f[4]):])
		}
		r.record(f[1]+"/"+f[2]+"/"+f[3], f[4] == "ok", detail)
	case len(f) >= 3 && f[0] == "RAIDD-REQ":
		token, action, arg := f[1], f[2], ""
		if len(f) > 3 {
			arg = f[3]
		}
		switch action {
		case "fail-and-rebuild", "check":
			a, ok := r.byName[arg]
			if !ok {
				r.answer(token, fmt.Errorf("unknown array %q", arg))
				return
			}
			r.handler.Add(1)
			go func() {
				defer r.handler.Done()
				var err error
				if action == "check" {
					err = r.check(a)
				} else {
					err = r.failAndRebuild(a)
				}
				r.answer(token, err)
			}()
		case "connections":
			r.answer(token, r.waitConnections(len(r.arrays)*r.conns))
		case "no-connections":
			r.answer(token, r.waitConnections(0))
		case "kill-restart":
			r.answer(token, r.killRestart())
		default:
			r.answer(token, fmt.Errorf("unknown request %q", action))
		}
	case line == "RAIDD-END":
		r.ended = true
	}
}

// raiddE runs the raidd binary and returns its output, and an error when
// it exits non-zero. Unlike raidd(), it may run outside the test goroutine.
func raiddE(args ...string) (string, error) {
	out, err := exec.Command(raiddBin, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("raidd %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// statusE is `raidd status --json`, decoded, outside the test goroutine.
func statusE(ctrl string) (struct {
	Arrays []fullStatus `json:"arrays"`
	NBD    struct {
		Active int `json:"active_connections"`
	} `json:"nbd"`
}, error) {
	var st struct {
		Arrays []fullStatus `json:"arrays"`
		NBD    struct {
			Active int `json:"active_connections"`
		} `json:"nbd"`
	}
	out, err := exec.Command(raiddBin, "status", "--json", "--control", ctrl).Output()
	if len(out) == 0 && err != nil {
		return st, fmt.Errorf("raidd status: %w", err)
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return st, fmt.Errorf("raidd status --json: %w: %s", err, out)
	}
	return st, nil
}

func arrayStatusE(ctrl, name string) (fullStatus, error) {
	st, err := statusE(ctrl)
	if err != nil {
		return fullStatus{}, err
	}
	for _, a := range st.Arrays {
		if a.Name == name {
			return a, nil
		}
	}
	return fullStatus{}, fmt.Errorf("array %s missing from raidd status", name)
}

// waitConnections waits until raidd has exactly n NBD connections open.
func (r *kernelRun) waitConnections(n int) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := statusE(r.cur().ctrl)
		if err != nil {
			return err
		}
		if st.NBD.Active == n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("raidd has %d NBD connections open, want %d", st.NBD.Active, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// failAndRebuild fails role 1 of a while the guest writes, waits for the
// guest's writes to reach the degraded array, adds a blank spare and waits
// for its rebuild. Whether a status poll caught client writes during the
// rebuild itself is logged: a short rebuild can fall between two polls.
func (r *kernelRun) failAndRebuild(a *array) (err error) {
	defer func() {
		detail := "member failed under client writes, spare rebuilt"
		if err != nil {
			detail = err.Error()
		}
		r.record(a.name+"/rebuild/host_fail_and_rebuild", err == nil, detail)
	}()
	ctrl := r.cur().ctrl
	failed := a.members[1]
	if _, err := raiddE("fail", "--control", ctrl, a.name, failed); err != nil {
		return err
	}
	st, err := arrayStatusE(ctrl, a.name)
	if err != nil {
		return err
	}
	if !st.Degraded {
		return fmt.Errorf("not degraded after raidd fail: %s", st.State)
	}
	written := st.Stats.ClientBytesWritten
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if st, err = arrayStatusE(ctrl, a.name); err != nil {
			return err
		}
		if st.Stats.ClientBytesWritten > written {
			break
		}
		if time.Now().After(deadline) {
			return errors.New("the guest's writes did not reach the degraded array within 30s")
		}
	}
	fi, err := os.Stat(failed)
	if err != nil {
		return err
	}
	spare := filepath.Join(filepath.Dir(failed), "spare.img")
	if err := os.WriteFile(spare, nil, 0o600); err != nil {
		return err
	}
	if err := os.Truncate(spare, fi.Size()); err != nil {
		return err
	}
	if _, err := raiddE("add", "--control", ctrl, a.name, spare); err != nil {
		return err
	}
	started := time.Now()
	var firstWritten int64 = -1
	overlap := false
	for {
		st, err := arrayStatusE(ctrl, a.name)
		if err != nil {
			return err
		}
		if st.Recovery != nil {
			if firstWritten < 0 {
				firstWritten = st.Stats.ClientBytesWritten
			} else if st.Stats.ClientBytesWritten > firstWritten {
				overlap = true
			}
		}
		if st.Recovery == nil && !st.Degraded {
			if _, ok := st.event("rebuild-finished"); !ok {
				return fmt.Errorf("no rebuild-finished event: %+v", st.History)
			}
			d, ok := st.device(spare)
			if !ok || d.State != "active" || d.Role != 1 {
				return fmt.Errorf("the spare is not active in role 1: %+v", st.Devices)
			}
			r.t.Logf("%s: rebuilt onto the spare in %v; client writes seen during the rebuild: %v",
				a.name, time.Since(started).Round(time.Millisecond), overlap)
			return nil
		}
		if time.Since(started) > recoveryTimeout {
			return fmt.Errorf("the rebuild did not finish within %v (state %s)", recoveryTimeout, st.State)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// check runs `raidd check` on a.
func (r *kernelRun) check(a *array) error {
	_, err := raiddE("check", "--control", r.cur().ctrl, a.name)
	r.record(a.name+"/rebuild/host_raidd_check", err == nil, fmt.Sprint(err))
	return err
}

// killRestart kills raidd with SIGKILL and starts it again on the same
// port. It runs in the test goroutine: the guest waits for it.
func (r *kernelRun) killRestart() error {
	old := r.cur()
	old.kill()
	if err := r.writeConfig(); err != nil {
		return err
	}
	srv := r.serve()
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	return nil
}

// report makes every step a subtest, in the guest's order, and fails the
// expected steps that were never reported.
func (r *kernelRun) report() {
	var expected []string
	for _, a := range r.arrays {
		for _, sc := range kernelScenarios {
			for _, s := range sc.steps {
				expected = append(expected, a.name+"/"+sc.name+"/"+s)
			}
		}
		expected = append(expected, a.name+"/rebuild/host_fail_and_rebuild", a.name+"/rebuild/host_raidd_check", a.name+"/after/host_check")
	}
	for g, steps := range kernelGlobalSteps {
		for _, s := range steps {
			expected = append(expected, g+"/"+s)
		}
	}
	keys := append([]string(nil), r.order...)
	for _, k := range expected {
		if _, ok := r.steps[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		res, seen := r.steps[k]
		r.t.Run(k, func(t *testing.T) {
			switch {
			case !seen:
				t.Error("never reported: the guest stopped before this step")
			case !res.ok:
				t.Errorf("FAIL at %v: %s", res.at.Round(time.Millisecond), res.detail)
			default:
				t.Logf("ok at %v %s", res.at.Round(time.Millisecond), res.detail)
			}
		})
	}
}

// timings logs the boot time, each scenario's time (scenarios run on all
// arrays at once; each ends with its last step) and the total.
func (r *kernelRun) timings(total time.Duration) {
	last := func(scenario string) time.Duration {
		var end time.Duration
		for k, s := range r.steps {
			if parts := strings.Split(k, "/"); len(parts) == 3 && parts[1] == scenario && s.at > end {
				end = s.at
			}
		}
		return end
	}
	boot := r.steps["guest/boot/up"].at
	r.t.Logf("kernel test times: boot %v", boot.Round(10*time.Millisecond))
	prev := boot
	for _, sc := range kernelScenarios {
		end := last(sc.name)
		r.t.Logf("kernel test times: scenario %s %v", sc.name, (end - prev).Round(10*time.Millisecond))
		prev = end
	}
	r.t.Logf("kernel test times: guest total %v, test total %v", prev.Round(10*time.Millisecond), total.Round(10*time.Millisecond))
}
