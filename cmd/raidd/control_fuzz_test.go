package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/raidd/raidd/internal/member"
	"github.com/raidd/raidd/nbd"
	"github.com/raidd/raidd/raid"
	_ "github.com/raidd/raidd/raid/raid1"
	"github.com/raidd/raidd/stripe"
)

// controlOps are the calls of the control API a fuzz input picks from.
var controlOps = []struct{ method, path string }{
	{"POST", "/v1/arrays/%s/fail"}, {"POST", "/v1/arrays/%s/remove"},
	{"POST", "/v1/arrays/%s/add"}, {"POST", "/v1/arrays/%s/replace"},
	{"POST", "/v1/arrays/%s/check"}, {"GET", "/v1/status"},
}

// FuzzControlRequest sends arbitrary bodies and array names to every call
// of the control API of a daemon serving a small RAID1 of memory members
// with a spare. No input may panic the server; every refusal is a JSON
// error with a message, and a 400 or 404 carries a code the client turns
// back into its sentinel. Inputs naming an absolute device path are
// skipped: the daemon would open that file.
func FuzzControlRequest(f *testing.F) {
	for _, s := range []struct {
		op   uint8
		name string
		body string
	}{
		{0, "r1", `{"member":"mem1"}`}, {0, "r1", `{"member":"1","force":true}`}, {1, "r1", `{"member":"mem2"}`},
		{2, "r1", `{"path":"relative.img"}`}, {3, "r1", `{"old":"mem0","new":"x"}`}, {4, "r1", ``},
		{5, "", ``}, {0, "nope", `{"member":"mem0"}`}, {0, "r1", `{"member":`}, {0, "r1", `{"unknown":1}`},
		{1, "r1", `[]`}, {3, "r1", `{"old":"","new":""}`}, {0, "r1", "\x00"},
	} {
		f.Add(s.op, s.name, []byte(s.body))
	}
	f.Fuzz(func(t *testing.T, op uint8, name string, body []byte) {
		var req memberRequest
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if dec.Decode(&req) == nil && (filepath.IsAbs(req.Path) || filepath.IsAbs(req.New)) {
			t.Skip("the daemon would open an absolute path")
		}
		devs := make([]raid.Device, 3)
		for i := range devs {
			devs[i] = raid.Device{Path: "mem" + string(rune('0'+i)), Member: member.NewMemory(4 << 20)}
		}
		a, err := raid.Create(devs[:2], raid.CreateOptions{Name: "r1", Level: stripe.RAID1, Chunk: 4 << 10}, raid.Options{CleanDelay: -1})
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		if err := a.AddMember(devs[2], false); err != nil {
			t.Fatal(err)
		}
		srv, err := nbd.NewServer(nbd.Options{Exports: []nbd.Export{{Name: "r1", Device: a}}})
		if err != nil {
			t.Fatal(err)
		}
		ac := ArrayConfig{Name: "r1"}
		d := &daemon{cfg: &Config{Arrays: []ArrayConfig{ac}}, log: slog.New(slog.NewTextHandler(io.Discard, nil)),
			nbd: srv, started: time.Now(), arrays: []*servedArray{{cfg: ac, array: a}}}
		d.metrics = newMetrics(d.status)
		c := controlOps[int(op)%len(controlOps)]
		path := c.path
		if c.method == "POST" {
			path = "/v1/arrays/" + url.PathEscape(name) + path[len("/v1/arrays/%s"):]
		}
		r := httptest.NewRequest(c.method, "http://raidd"+path, bytes.NewReader(body))
		w := httptest.NewRecorder()
		d.controlHandler().ServeHTTP(w, r)
		res := w.Result()
		if res.StatusCode == http.StatusOK {
			if !json.Valid(w.Body.Bytes()) {
				t.Fatalf("%s %s: 200 with a body that is not JSON: %q", c.method, path, w.Body.String())
			}
			return
		}
		if res.Header.Get("Content-Type") != "application/json" && res.StatusCode < 500 {
			return // the mux's own answer (redirect to a clean path, 404, 405): no handler ran
		}
		var e errorReply
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" {
			t.Fatalf("%s %s: %d without a JSON error: %q (%v)", c.method, path, res.StatusCode, w.Body.String(), err)
		}
		if res.StatusCode == http.StatusBadRequest || res.StatusCode == http.StatusNotFound {
			if e.Code == "" {
				t.Fatalf("%s %s body %q: %d error without a code: %s", c.method, path, body, res.StatusCode, e.Error)
			}
			got := decodeError(e.Code, e.Error)
			var ce *codeError
			if !errors.As(got, &ce) || ce.err == nil {
				t.Fatalf("code %q of %q decodes to no sentinel", e.Code, e.Error)
			}
		}
	})
}

// FuzzDecodeError: whatever code and message a daemon sends, the client's
// error keeps the message, wraps the code's sentinel when the code is
// known, and maps back to the same code.
func FuzzDecodeError(f *testing.F) {
	for _, c := range errorCodes {
		f.Add(c.code, "message of "+c.code)
	}
	f.Add("", "plain")
	f.Add("from_a_newer_daemon", "x")
	f.Fuzz(func(t *testing.T, code, msg string) {
		err := decodeError(code, msg)
		if err == nil || err.Error() != msg {
			t.Fatalf("decodeError(%q, %q) = %v, want the message", code, msg, err)
		}
		for _, c := range errorCodes {
			if c.code == code {
				if !errors.Is(err, c.err) {
					t.Fatalf("code %q does not wrap its sentinel", code)
				}
				if back := errorCode(err); back != code {
					t.Fatalf("code %q maps back to %q", code, back)
				}
				return
			}
		}
		if errorCode(err) != "" {
			t.Fatalf("unknown code %q wraps sentinel %q", code, errorCode(err))
		}
	})
}
