package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/raidd/raidd/nbd"
	"github.com/raidd/raidd/raid"
)

// The control API is plain HTTP/1.1 with JSON bodies on a unix socket
// (Config.Control); file permissions on the socket are its access control.
//
//	GET  /v1/status              statusReply
//	POST /v1/arrays/{name}/check checkReply; 409 while a check of that array runs
//	GET  /metrics                Prometheus text format
//
// Errors are JSON {"error": "..."} with a 4xx or 5xx status.

// statusReply is the body of GET /v1/status.
type statusReply struct {
	Version string        `json:"version"`
	PID     int           `json:"pid"`
	Started time.Time     `json:"started"`
	Listen  []string      `json:"listen"`
	Arrays  []arrayStatus `json:"arrays"`
	NBD     nbdStats      `json:"nbd"`
}

// arrayStatus is raid.Status plus the export it is served as.
type arrayStatus struct {
	Export string `json:"export"`
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
	OtherCommands     int64 `json:"other_commands"`
	BytesRead         int64 `json:"bytes_read"`
	BytesWritten      int64 `json:"bytes_written"`
	ErrorReplies      int64 `json:"error_replies"`
}

func toNBDStats(s nbd.Stats) nbdStats {
	return nbdStats{
		Connections: s.Connections, ActiveConnections: s.ActiveConnections,
		Handshakes: s.Handshakes, HandshakeFailures: s.HandshakeFailures,
		Reads: s.Reads, Writes: s.Writes, Flushes: s.Flushes, Trims: s.Trims,
		Caches: s.Caches, WriteZeroes: s.WriteZeroes, Disconnects: s.Disconnects,
		OtherCommands: s.OtherCommands, BytesRead: s.BytesRead,
		BytesWritten: s.BytesWritten, ErrorReplies: s.ErrorReplies,
	}
}

// checkReply is the body of POST /v1/arrays/{name}/check.
type checkReply struct {
	Array      string  `json:"array"`
	Consistent bool    `json:"consistent"`
	Error      string  `json:"error,omitempty"`
	Seconds    float64 `json:"seconds"`
}

type errorReply struct {
	Error string `json:"error"`
}

func (d *daemon) controlHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", d.handleStatus)
	mux.HandleFunc("POST /v1/arrays/{name}/check", d.handleCheck)
	mux.HandleFunc("GET /metrics", d.handleMetrics)
	return mux
}

func (d *daemon) status() statusReply {
	r := statusReply{
		Version: version, PID: os.Getpid(), Started: d.started,
		Listen: d.cfg.Listen, NBD: toNBDStats(d.nbd.Stats()),
		Arrays: make([]arrayStatus, len(d.arrays)),
	}
	for i, s := range d.arrays {
		r.Arrays[i] = arrayStatus{Export: s.cfg.exportName(), Status: s.array.Status()}
	}
	return r
}

func (d *daemon) handleStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, d.status())
}

// handleCheck runs Array.Check to completion. The check reads every row
// under its stripe locks, so I/O continues while it runs.
func (d *daemon) handleCheck(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	var s *servedArray
	for _, a := range d.arrays {
		if a.cfg.Name == name {
			s = a
		}
	}
	if s == nil {
		writeJSON(w, http.StatusNotFound, errorReply{fmt.Sprintf("no array named %q", name)})
		return
	}
	if !s.checking.CompareAndSwap(false, true) {
		writeJSON(w, http.StatusConflict, errorReply{fmt.Sprintf("a check of %q is already running", name)})
		return
	}
	defer s.checking.Store(false)
	d.log.Info("check started", "array", name)
	start := time.Now()
	err := s.array.Check()
	reply := checkReply{Array: name, Consistent: err == nil, Seconds: time.Since(start).Seconds()}
	switch {
	case err == nil:
		d.log.Info("check finished: consistent", "array", name, "elapsed", time.Since(start).Round(time.Millisecond))
	case errors.Is(err, raid.ErrInconsistent):
		reply.Error = err.Error()
		d.log.Warn("check finished: inconsistent", "array", name, "err", err)
	default:
		d.log.Error("check failed", "array", name, "err", err)
		writeJSON(w, http.StatusInternalServerError, errorReply{err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, reply)
}

func (d *daemon) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	writeMetrics(w, d.status())
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
	req, err := http.NewRequestWithContext(ctx, method, "http://raidd"+path, nil)
	if err != nil {
		return err
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
			return errors.New(e.Error)
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
	}
	return json.Unmarshal(body, out)
}
