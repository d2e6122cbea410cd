package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/raidd/raidd/nbd"
	"github.com/raidd/raidd/raid"
)

// The control API is plain HTTP/1.1 with JSON bodies on a unix socket
// (Config.Control); file permissions on the socket are its access control.
//
//	GET  /v1/status                statusReply
//	POST /v1/arrays/{name}/check   [{"repair": bool}] -> checkReply; 409 while a scrub of that array runs
//	POST /v1/arrays/{name}/fail    {"member": ID}                    -> memberReply
//	POST /v1/arrays/{name}/remove  {"member": ID}                    -> memberReply
//	POST /v1/arrays/{name}/add     {"path": PATH, "force": bool}      -> memberReply
//	POST /v1/arrays/{name}/replace {"old": ID, "new": PATH, "force": bool} -> memberReply
//	GET  /metrics                  Prometheus text format
//
// ID names a member by path, member UUID or role number; PATH is the
// absolute path of a device the daemon opens itself. Errors are JSON
// {"error": "...", "code": "..."} with a 4xx or 5xx status: 404 for an
// unknown array or member, 409 when the array's state forbids the change,
// 400 for a bad request or a device that cannot be opened. The code names
// the sentinel error (errcode.go) and the client turns it back into that
// sentinel, so callers classify errors with errors.Is.

// statusReply is the body of GET /v1/status.
type statusReply struct {
	Version string        `json:"version"`
	PID     int           `json:"pid"`
	Started time.Time     `json:"started"`
	Listen  []string      `json:"listen"`
	Arrays  []arrayStatus `json:"arrays"`
	NBD     nbdStats      `json:"nbd"`
}

// arrayStatus is raid.Status plus the export it is served as. An array
// that could not be assembled has only its name, export, state "failed"
// and Error, the reason.
type arrayStatus struct {
	Export string `json:"export"`
	Error  string `json:"error,omitempty"`
	raid.Status
}

// nbdStats is nbd.Stats with stable snake_case JSON names.
type nbdStats struct {
	Connections       int64 `json:"connections"`
	ActiveConnections int64 `json:"active_connections"`
	Handshakes        int64 `json:"handshakes"`
	HandshakeFailures int64 `json:"handshake_failures"`
	Reads             int64 `json:"reads"`
	Writes            int64 `json:"writes"`
	Flushes           int64 `json:"flushes"`
	Trims             int64 `json:"trims"`
	Caches            int64 `json:"caches"`
	WriteZeroes       int64 `json:"write_zeroes"`
	Disconnects       int64 `json:"disconnects"`
	BlockStatuses     int64 `json:"block_statuses"`
	OtherCommands     int64 `json:"other_commands"`
	BytesRead         int64 `json:"bytes_read"`
	// BytesSpliced: the part of BytesRead sent from member files without
	// a copy (nbd.Splicer).
	BytesSpliced int64 `json:"bytes_spliced"`
	BytesWritten int64 `json:"bytes_written"`
	// BytesStreamed: the part of BytesWritten written to the array while
	// the payload arrived (nbd's streamed WRITEs).
	BytesStreamed int64 `json:"bytes_streamed"`
	// BytesReceived: the part of BytesStreamed received straight into
	// the members' memory (nbd.Receiver).
	BytesReceived int64 `json:"bytes_received"`
	ErrorReplies  int64 `json:"error_replies"`
	// Resource bounds (nbd.Options.MaxConnections and the timeouts).
	RefusedConnections int64 `json:"refused_connections"`
	IdleTimeouts       int64 `json:"idle_timeouts"`
	IOTimeouts         int64 `json:"io_timeouts"`
	InFlightBytes      int64 `json:"in_flight_bytes"`
	// TLS handshakes after NBD_OPT_STARTTLS that succeeded and failed.
	TLSHandshakes int64 `json:"tls_handshakes"`
	TLSFailures   int64 `json:"tls_failures"`
}

func toNBDStats(s nbd.Stats) nbdStats {
	return nbdStats{
		Connections: s.Connections, ActiveConnections: s.ActiveConnections,
		Handshakes: s.Handshakes, HandshakeFailures: s.HandshakeFailures,
		Reads: s.Reads, Writes: s.Writes, Flushes: s.Flushes, Trims: s.Trims,
		Caches: s.Caches, WriteZeroes: s.WriteZeroes, Disconnects: s.Disconnects,
		BlockStatuses: s.BlockStatuses, OtherCommands: s.OtherCommands, BytesRead: s.BytesRead,
		BytesSpliced: s.BytesSpliced,
		BytesWritten: s.BytesWritten, BytesStreamed: s.BytesStreamed,
		BytesReceived: s.BytesReceived, ErrorReplies: s.ErrorReplies,
		RefusedConnections: s.RefusedConnections, IdleTimeouts: s.IdleTimeouts,
		IOTimeouts: s.IOTimeouts, InFlightBytes: s.InFlightBytes,
		TLSHandshakes: s.TLSHandshakes, TLSFailures: s.TLSFailures,
	}
}

// checkReply is the body of POST /v1/arrays/{name}/check.
type checkReply struct {
	Array string `json:"array"`
	// Consistent is true only when every row was verified and agrees: a
	// degraded array with rows that could not be verified is not.
	Consistent bool `json:"consistent"`
	// Repair says the scrub rewrote what it found wrong (check --repair).
	Repair bool `json:"repair,omitempty"`
	// CheckResult counts the rows verified, inconsistent and unverifiable,
	// the mismatches found and repaired, and lists the first of them.
	raid.CheckResult
	Error   string  `json:"error,omitempty"`
	Seconds float64 `json:"seconds"`
}

// checkRequest is the optional body of POST /v1/arrays/{name}/check.
type checkRequest struct {
	Repair bool `json:"repair"`
}

// errorReply is the body of every error answer. Code names the sentinel
// the error wraps (errorCodes); it is empty for an error without one.
type errorReply struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

func (d *daemon) controlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", d.handleStatus)
	mux.HandleFunc("POST /v1/arrays/{name}/check", d.handleCheck)
	for _, op := range []string{"fail", "remove", "add", "replace"} {
		mux.HandleFunc("POST /v1/arrays/{name}/"+op, d.handleMember)
	}
	mux.Handle("GET /metrics", d.metrics.handler(d.log))
	return mux
}

func (d *daemon) status() statusReply {
	r := statusReply{
		Version: versionString(), PID: os.Getpid(), Started: d.started,
		Listen: d.cfg.Listen, NBD: toNBDStats(d.nbd.Stats()),
		Arrays: make([]arrayStatus, 0, len(d.arrays)+len(d.broken)),
	}
	// In the order of the configuration, broken arrays included.
	served := make(map[string]*servedArray, len(d.arrays))
	for _, s := range d.arrays {
		served[s.cfg.Name] = s
	}
	broken := make(map[string]error, len(d.broken))
	for _, b := range d.broken {
		broken[b.cfg.Name] = b.err
	}
	for _, ac := range d.cfg.Arrays {
		if s := served[ac.Name]; s != nil {
			r.Arrays = append(r.Arrays, arrayStatus{Export: s.cfg.exportName(), Status: s.array.Status()})
			delete(served, ac.Name)
		} else if err := broken[ac.Name]; err != nil {
			r.Arrays = append(r.Arrays, arrayStatus{Export: ac.exportName(), Error: err.Error(),
				Status: raid.Status{Name: ac.Name, State: "failed", Failed: true, ReadOnly: ac.ReadOnly, Devices: []raid.MemberStatus{}}})
		}
	}
	for _, s := range d.arrays { // served but not configured: none today
		if served[s.cfg.Name] != nil {
			r.Arrays = append(r.Arrays, arrayStatus{Export: s.cfg.exportName(), Status: s.array.Status()})
		}
	}
	return r
}

func (d *daemon) handleStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, d.status())
}

// handleCheck runs a scrub of the array (Array.StartScrub), a background
// job of the array at its rebuild rates, and answers when it ends. I/O
// continues while it runs. If the client goes away the scrub goes on; a
// second request while it runs is refused (409, check_running).
func (d *daemon) handleCheck(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s, err := d.lookup(name)
	if err != nil {
		writeError(w, http.StatusNotFound, err)
		return
	}
	var req checkRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, http.StatusBadRequest, fmt.Errorf("check: %w: body: %v", errBadRequest, err))
		return
	}
	kind := "check"
	if req.Repair {
		kind = "repair"
	}
	start := time.Now()
	sc, err := s.array.StartScrub(req.Repair)
	switch {
	case errors.Is(err, raid.ErrScrubRunning):
		writeError(w, http.StatusConflict, fmt.Errorf("%w: %q: %w", errCheckRunning, name, err))
		return
	case errors.Is(err, raid.ErrReadOnly), errors.Is(err, raid.ErrFailed), errors.Is(err, raid.ErrClosed):
		writeError(w, http.StatusConflict, fmt.Errorf("%s of %q: %w", kind, name, err))
		return
	case err != nil:
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	d.log.Info(kind+" started", "array", name)
	res, err := sc.Wait(r.Context())
	reply := checkReply{Array: name, Repair: req.Repair, Consistent: err == nil && res.Consistent(), CheckResult: res, Seconds: time.Since(start).Seconds()}
	switch {
	case err == nil && req.Repair && res.Mismatches > 0:
		d.log.Warn(kind+" finished: mismatches repaired", "array", name, "result", res.String())
	case err == nil:
		d.log.Info(kind+" finished: consistent", "array", name, "rows", res.Rows, "elapsed", time.Since(start).Round(time.Millisecond))
	case r.Context().Err() != nil:
		d.log.Info(kind+" goes on in the background; the client left", "array", name)
		return
	case errors.Is(err, raid.ErrClosed), errors.Is(err, raid.ErrFailed):
		d.log.Error(kind+" failed", "array", name, "err", err)
		writeError(w, http.StatusInternalServerError, err)
		return
	case errors.Is(err, raid.ErrInconsistent), errors.Is(err, raid.ErrUnverifiable):
		reply.Error = err.Error()
		d.log.Warn(kind+" finished: not consistent", "array", name, "result", res.String(), "err", err)
	default:
		d.log.Error(kind+" failed", "array", name, "err", err)
		writeError(w, http.StatusInternalServerError, err)
		return
	}
	writeJSON(w, http.StatusOK, reply)
}

// lookup returns the served array called name, or an error listing the
// arrays there are.
func (d *daemon) lookup(name string) (*servedArray, error) {
	names := make([]string, len(d.arrays))
	for i, a := range d.arrays {
		if a.cfg.Name == name {
			return a, nil
		}
		names[i] = strconv.Quote(a.cfg.Name)
	}
	for _, b := range d.broken {
		if b.cfg.Name == name {
			return nil, fmt.Errorf("%w: array %q could not be assembled when raidd started (%v); fix it and restart raidd", errNotAssembled, name, b.err)
		}
	}
	return nil, fmt.Errorf("%w: no array named %q is running (arrays: %s)", errNoArray, name, strings.Join(names, ", "))
}

// memberRequest is the body of the member management calls; each uses
// the fields its line in the API table names.
type memberRequest struct {
	Member string `json:"member,omitempty"`
	Path   string `json:"path,omitempty"`
	Old    string `json:"old,omitempty"`
	New    string `json:"new,omitempty"`
	Force  bool   `json:"force,omitempty"`
}

// memberReply is the answer to a successful member change: what was done
// and the array's status right after it.
type memberReply struct {
	Message string      `json:"message"`
	Array   arrayStatus `json:"array"`
}

// handleMember serves fail, remove, add and replace.
func (d *daemon) handleMember(w http.ResponseWriter, r *http.Request) {
	op := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	s, err := d.lookup(r.PathValue("name"))
	if err != nil {
		writeError(w, http.StatusNotFound, err)
		return
	}
	var req memberRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("%s: %w: body: %v", op, errBadRequest, err))
		return
	}
	need := func(field, v string) bool {
		if v == "" {
			writeError(w, http.StatusBadRequest, fmt.Errorf("%s: %w: %q is required", op, errBadRequest, field))
			return false
		}
		return true
	}
	// A member or device named by another path to the same file (a
	// symlink, /dev/disk/by-id) is the device this raidd knows by its own.
	req.Member, req.Old = d.knownPath(req.Member), d.knownPath(req.Old)
	req.Path, req.New = d.knownPath(req.Path), d.knownPath(req.New)
	// Open a new device before taking opsMu: the path is the client's, and
	// however long its open takes, it must not hold up shutdown.
	var dev raid.Device
	switch {
	case op == "add" && need("path", req.Path):
		dev, err = d.openNew(s, op, req.Path, req.Force)
	case op == "replace" && need("old", req.Old) && need("new", req.New):
		dev, err = d.openNew(s, op, req.New, req.Force)
	case op == "add" || op == "replace":
		return // need answered
	}
	handed := false // the array owns dev once AddMember or ReplaceMember is called
	defer func() {
		if dev.Member != nil && !handed {
			_ = dev.Member.Close()
		}
	}()
	d.opsMu.RLock()
	defer d.opsMu.RUnlock()
	if d.stopping {
		writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%s: %w", op, errStopping))
		return
	}
	name := s.cfg.Name
	var msg string
	switch op {
	case "fail":
		if !need("member", req.Member) {
			return
		}
		err = s.array.FailMemberChecked(req.Member, req.Force)
	case "remove":
		if !need("member", req.Member) {
			return
		}
		err = s.array.RemoveMember(req.Member)
	case "add":
		if err == nil {
			handed, err = true, s.array.AddMember(dev, req.Force)
		}
		msg = fmt.Sprintf("%s: %s added", name, req.Path)
	case "replace":
		if err == nil {
			handed, err = true, s.array.ReplaceMember(req.Old, dev, req.Force)
		}
		msg = fmt.Sprintf("%s: replacing %s with %s", name, req.Old, req.New)
	}
	if err != nil {
		d.log.Warn("member change refused", "array", name, "op", op, "err", err)
		writeError(w, memberErrorCode(err), err)
		return
	}
	st := s.array.Status()
	switch op { // named after the change: its event has the path and role
	case "fail":
		msg = fmt.Sprintf("%s: %s marked failed", name, memberNamed(st.History, raid.EventMemberFailed, req.Member))
	case "remove":
		msg = fmt.Sprintf("%s: %s removed", name, memberNamed(st.History, raid.EventMemberRemoved, req.Member))
	}
	if p := st.Recovery; p != nil {
		where := p.Path
		if where == "" {
			where = "a spare"
		}
		msg += fmt.Sprintf("; %s of role %d onto %s in progress", p.Kind, p.Role, where)
	}
	d.log.Info("member change", "array", name, "op", op, "result", msg)
	writeJSON(w, http.StatusOK, memberReply{Message: msg, Array: arrayStatus{Export: s.cfg.exportName(), Status: st}})
}

// memberNamed says which member a fail or remove named by id (a path,
// UUID or role) was: its path and role, from the newest event of kind,
// which the change just recorded.
func memberNamed(history []raid.Event, kind raid.EventKind, id string) string {
	for i := len(history) - 1; i >= 0; i-- {
		e := history[i]
		if e.Kind != kind {
			continue
		}
		switch {
		case e.Path == "" || e.Path == id && e.Role < 0:
			return id
		case e.Role < 0:
			return e.Path
		case e.Path == id:
			return fmt.Sprintf("%s (role %d)", id, e.Role)
		}
		return fmt.Sprintf("%s (role %d)", e.Path, e.Role)
	}
	return id
}

// knownPath returns the path under which an array of this raidd holds
// the file that p names, when p is an absolute path naming the same file
// (os.SameFile) by another spelling; otherwise p.
func (d *daemon) knownPath(p string) string {
	if !filepath.IsAbs(p) {
		return p
	}
	fi, err := os.Stat(p)
	if err != nil {
		return p
	}
	for _, x := range d.arrays {
		for _, m := range x.array.Status().Devices {
			if m.Path == p {
				return p
			}
			if m.Path == "" {
				continue
			}
			if mi, err := os.Stat(m.Path); err == nil && os.SameFile(fi, mi) {
				return m.Path
			}
		}
	}
	return p
}

// openNew opens a device for op, add or replace, the way serve opens
// members: exclusively locked, with the array's direct setting.
func (d *daemon) openNew(s *servedArray, op, path string, force bool) (raid.Device, error) {
	if !filepath.IsAbs(path) {
		return raid.Device{}, badRequest{fmt.Errorf("%q is not an absolute path", path)}
	}
	if s.array.ReadOnly() {
		return raid.Device{}, raid.ErrReadOnly
	}
	if err := d.release(s, path); err != nil {
		return raid.Device{}, err
	}
	m, err := openMember(path, false, s.cfg.Direct, force)
	if errors.Is(err, os.ErrNotExist) {
		err = fmt.Errorf("%s: %w; %s takes an existing file or block device at least as large as the array's members (make a file first, e.g. truncate -s SIZE %s)", path, os.ErrNotExist, op, path)
	}
	if err != nil {
		return raid.Device{}, badRequest{err}
	}
	return raid.Device{Path: path, Member: m}, nil
}

// release lets path be opened again when this raidd holds it as the
// device of a failed or stale member of array s (a re-add: 'raidd fail'
// or a stale member, then 'raidd add' of the same device). The member
// lock would otherwise refuse it, since this process holds it. A device
// that another array of this raidd holds, in any state, is refused with
// what to do, and stays where it is: it is checked before anything is
// released, and only s ever releases a device here.
func (d *daemon) release(s *servedArray, path string) error {
	for _, x := range d.arrays {
		if x == s {
			continue
		}
		for _, m := range x.array.Status().Devices {
			if m.Path != path {
				continue
			}
			take := fmt.Sprintf("'raidd remove %s %s' first", x.cfg.Name, path)
			if m.State != "failed" && m.State != "stale" && m.State != "removed" && m.State != "spare" {
				take = fmt.Sprintf("'raidd fail %s %s' (if %q can spare it) and 'raidd remove %s %s' first", x.cfg.Name, path, x.cfg.Name, x.cfg.Name, path)
			}
			return fmt.Errorf("%w: %s is a device of array %q of this raidd (%s): a device serves one array. Add another device to %q; or, to move this one, take it out of %q with %s, then add it here with --force (its superblock names %q, and its data is overwritten)",
				raid.ErrBusy, path, x.cfg.Name, m.State, s.cfg.Name, x.cfg.Name, take, x.cfg.Name)
		}
	}
	err := s.array.Release(path)
	switch {
	case err == nil:
		d.log.Info("released the device of a failed or stale member for re-adding", "array", s.cfg.Name, "path", path)
		return nil
	case errors.Is(err, raid.ErrNoMember):
		return nil
	}
	return err
}

// badRequest marks errors in what the client asked for.
type badRequest struct{ error }

func (e badRequest) Unwrap() error { return e.error }

// Is makes every badRequest an errBadRequest too.
func (e badRequest) Is(target error) bool { return target == errBadRequest }

// memberErrorCode maps a member change error to an HTTP status.
func memberErrorCode(err error) int {
	var br badRequest
	switch {
	case errors.Is(err, raid.ErrNoMember):
		return http.StatusNotFound
	case errors.Is(err, raid.ErrBusy), errors.Is(err, raid.ErrInUse), errors.Is(err, raid.ErrReadOnly), errors.Is(err, raid.ErrWouldFail):
		return http.StatusConflict
	case errors.As(err, &br):
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// writeError answers with err and its protocol code.
func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, errorReply{Error: err.Error(), Code: errorCode(err)})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// controlClient talks to a running raidd over its control socket.
type controlClient struct {
	socket string
	http   *http.Client
}

func newControlClient(socket string) *controlClient {
	return &controlClient{socket: socket, http: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}}}
}

// do sends a request and decodes a JSON reply into out.
func (c *controlClient) do(ctx context.Context, method, path string, out any) error {
	return c.doBody(ctx, method, path, nil, out)
}

// doBody is do with a JSON request body (none if in is nil).
func (c *controlClient) doBody(ctx context.Context, method, path string, in, out any) error {
	var reqBody io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		reqBody = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://raidd"+path, reqBody)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
			return fmt.Errorf("raidd is not running (no control socket at %s): %w", c.socket, err)
		}
		return fmt.Errorf("control socket %s: %w", c.socket, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		var e errorReply
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return decodeError(e.Code, e.Error)
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, out)
}
