package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/raidd/raidd/raid"
)

// TestErrorCodeRoundTrip sends every sentinel of errorCodes through a real
// control socket and checks that the client gets an error that is the same
// sentinel (errors.Is), with the daemon's message, and none of the others.
func TestErrorCodeRoundTrip(t *testing.T) {
	dir, err := os.MkdirTemp("", "raidd")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "ctl.sock")
	l, err := net.Listen("unix", sock)
	require.NoError(t, err)
	var current error
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusConflict, current)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	cl := newControlClient(sock)

	codes := map[string]bool{}
	for _, c := range errorCodes {
		require.False(t, codes[c.code], "code %q is listed twice", c.code)
		codes[c.code] = true
		t.Run(c.code, func(t *testing.T) {
			current = fmt.Errorf("array data: %w: details", c.err)
			require.Equal(t, c.code, errorCode(current))
			got := cl.do(context.Background(), "GET", "/x", nil)
			require.Error(t, got)
			assert.ErrorIs(t, got, c.err)
			assert.Equal(t, current.Error(), got.Error(), "the message is the daemon's")
			for _, o := range errorCodes {
				if o.code != c.code && !errors.Is(c.err, o.err) {
					assert.NotErrorIs(t, got, o.err, "code %s must not also be %s", c.code, o.code)
				}
			}
		})
	}

	t.Run("no code", func(t *testing.T) {
		current = errors.New("something else")
		got := cl.do(context.Background(), "GET", "/x", nil)
		require.EqualError(t, got, "something else")
		for _, o := range errorCodes {
			assert.NotErrorIs(t, got, o.err)
		}
	})
	t.Run("unknown code", func(t *testing.T) {
		got := decodeError("from_the_future", "a newer daemon's error")
		require.EqualError(t, got, "a newer daemon's error")
		var ce *codeError
		require.ErrorAs(t, got, &ce)
		assert.Equal(t, "from_the_future", ce.code)
		assert.Nil(t, errors.Unwrap(got))
	})
	t.Run("bad request wrapping a cause", func(t *testing.T) {
		// A device that cannot be opened is a bad request whose code is
		// the more precise cause.
		assert.Equal(t, "no_device", errorCode(badRequest{fmt.Errorf("open /x: %w", os.ErrNotExist)}))
		assert.Equal(t, "bad_request", errorCode(badRequest{errors.New("relative path")}))
		assert.Equal(t, "busy", errorCode(errors.Join(errors.New("x"), fmt.Errorf("%w: y", raid.ErrBusy))))
	})
}

// TestControlErrorsThroughDaemon: the errors of a real daemon's handlers
// reach the client as their sentinels.
func TestControlErrorsThroughDaemon(t *testing.T) {
	e := newEnv(t)
	e.create(t, "m", "1", "a.img", "b.img")
	serve(t, e.config(t, "", e.array("m", "", "a.img", "b.img"), e.array("gone", "", "x.img", "y.img")))
	cl := newControlClient(e.control)
	post := func(array, op string, req memberRequest) error {
		var reply memberReply
		return cl.doBody(context.Background(), "POST", "/v1/arrays/"+array+"/"+op, req, &reply)
	}
	tests := map[string]struct {
		err  error
		want error
	}{
		"unknown member":      {post("m", "fail", memberRequest{Member: "nope"}), raid.ErrNoMember},
		"unknown array":       {post("zzz", "fail", memberRequest{Member: "0"}), errNoArray},
		"not assembled":       {post("gone", "fail", memberRequest{Member: "0"}), errNotAssembled},
		"active member":       {post("m", "remove", memberRequest{Member: e.paths("a.img")[0]}), raid.ErrBusy},
		"missing field":       {post("m", "fail", memberRequest{}), errBadRequest},
		"relative path":       {post("m", "add", memberRequest{Path: "rel.img"}), errBadRequest},
		"no such device":      {post("m", "add", memberRequest{Path: e.paths("none.img")[0]}), os.ErrNotExist},
		"active member added": {post("m", "add", memberRequest{Path: e.paths("b.img")[0]}), raid.ErrBusy},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			require.Error(t, tt.err)
			assert.ErrorIs(t, tt.err, tt.want, "%v", tt.err)
		})
	}
}
