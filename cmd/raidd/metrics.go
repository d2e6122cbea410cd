package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// writeMetrics renders st in the Prometheus text exposition format. It is
// written by hand: a few gauges and counters do not justify a client
// library.
func writeMetrics(w io.Writer, st statusReply) {
	b := bufio.NewWriter(w)
	defer b.Flush()
	family := func(name, typ, help string) {
		fmt.Fprintf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
	}
	sample := func(name string, labels []string, v float64) {
		b.WriteString(name)
		if len(labels) > 0 {
			b.WriteByte('{')
			for i := 0; i < len(labels); i += 2 {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(b, "%s=\"%s\"", labels[i], escapeLabel(labels[i+1]))
			}
			b.WriteByte('}')
		}
		b.WriteByte(' ')
		b.WriteString(strconv.FormatFloat(v, 'f', -1, 64))
		b.WriteByte('\n')
	}
	bool01 := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	// perArray emits one family with a sample per array.
	perArray := func(name, typ, help string, f func(a *arrayStatus) float64) {
		family(name, typ, help)
		for i := range st.Arrays {
			sample(name, []string{"array", st.Arrays[i].Name}, f(&st.Arrays[i]))
		}
	}

	family("raidd_array_info", "gauge", "Array identity; always 1.")
	for _, a := range st.Arrays {
		sample("raidd_array_info", []string{"array", a.Name, "export", a.Export, "level", a.Level, "uuid", a.UUID}, 1)
	}
	perArray("raidd_array_assembled", "gauge", "1 if the array is assembled and served; 0 if it could not be assembled at start (then raidd_array_failed is 1).", func(a *arrayStatus) float64 { return bool01(a.Error == "") })
	perArray("raidd_array_size_bytes", "gauge", "Usable array size.", func(a *arrayStatus) float64 { return float64(a.Size) })
	perArray("raidd_array_chunk_bytes", "gauge", "Chunk size.", func(a *arrayStatus) float64 { return float64(a.Chunk) })
	perArray("raidd_array_degraded", "gauge", "1 if the array runs without full redundancy.", func(a *arrayStatus) float64 { return bool01(a.Degraded) })
	perArray("raidd_array_failed", "gauge", "1 if the array lost more members than its level tolerates.", func(a *arrayStatus) float64 { return bool01(a.Failed) })
	perArray("raidd_array_dirty", "gauge", "1 if the superblocks say dirty (writes may be in flight).", func(a *arrayStatus) float64 { return bool01(a.Dirty) })
	perArray("raidd_array_read_only", "gauge", "1 if the array is exported read-only.", func(a *arrayStatus) float64 { return bool01(a.ReadOnly) })
	perArray("raidd_array_events", "gauge", "Superblock event counter.", func(a *arrayStatus) float64 { return float64(a.EventCount) })
	perArray("raidd_array_resync_ratio", "gauge", "Progress of the running resync from 0 to 1; 1 when none runs.", func(a *arrayStatus) float64 {
		if a.Resync == nil || a.Resync.Total == 0 {
			return 1
		}
		return float64(a.Resync.Done) / float64(a.Resync.Total)
	})
	perArray("raidd_array_client_read_bytes_total", "counter", "Bytes read by clients.", func(a *arrayStatus) float64 { return float64(a.Stats.ClientBytesRead) })
	perArray("raidd_array_client_written_bytes_total", "counter", "Bytes written by clients.", func(a *arrayStatus) float64 { return float64(a.Stats.ClientBytesWritten) })
	perArray("raidd_array_client_zeroed_bytes_total", "counter", "Bytes discarded or zeroed by clients.", func(a *arrayStatus) float64 { return float64(a.Stats.ClientBytesZeroed) })
	perArray("raidd_array_member_written_bytes_total", "counter", "Bytes written to members for client writes, parity and mirrors included.", func(a *arrayStatus) float64 { return float64(a.Stats.MemberBytesWritten) })
	perArray("raidd_array_member_elided_bytes_total", "counter", "All-zero blocks of member writes for client writes punched instead of written.", func(a *arrayStatus) float64 { return float64(a.Stats.MemberBytesElided) })
	perArray("raidd_array_member_discarded_bytes_total", "counter", "Bytes punched on members for client discards and write-zeroes.", func(a *arrayStatus) float64 { return float64(a.Stats.MemberBytesDiscarded) })
	perArray("raidd_array_member_zero_written_bytes_total", "counter", "Zeroes and parity written to members for client discards and write-zeroes.", func(a *arrayStatus) float64 { return float64(a.Stats.MemberBytesZeroWritten) })
	perArray("raidd_array_write_amplification", "gauge", "(member bytes written + zero blocks elided) / client bytes written, for client writes only.", func(a *arrayStatus) float64 { return a.Stats.WriteAmplification })
	perArray("raidd_array_rebuild_written_bytes_total", "counter", "Bytes written to new members by rebuilds and replaces.", func(a *arrayStatus) float64 { return float64(a.Stats.RebuildBytesWritten) })
	perArray("raidd_array_rebuild_discarded_bytes_total", "counter", "Never-written rows punched on new members by rebuilds and replaces.", func(a *arrayStatus) float64 { return float64(a.Stats.RebuildBytesDiscarded) })
	perArray("raidd_array_resync_written_bytes_total", "counter", "Parity and copies rewritten by resyncs.", func(a *arrayStatus) float64 { return float64(a.Stats.ResyncBytesWritten) })
	perArray("raidd_array_repair_written_bytes_total", "counter", "Bytes rewritten on members after read errors.", func(a *arrayStatus) float64 { return float64(a.Stats.RepairBytesWritten) })

	family("raidd_member_state", "gauge", "1 for the state each member or role is in.")
	for _, a := range st.Arrays {
		for _, m := range a.Devices {
			sample("raidd_member_state", []string{"array", a.Name, "role", strconv.Itoa(m.Role), "path", m.Path, "uuid", m.UUID, "state", m.State}, 1)
		}
	}

	n := st.NBD
	family("raidd_nbd_connections_total", "counter", "NBD connections accepted.")
	sample("raidd_nbd_connections_total", nil, float64(n.Connections))
	family("raidd_nbd_active_connections", "gauge", "NBD connections open now.")
	sample("raidd_nbd_active_connections", nil, float64(n.ActiveConnections))
	family("raidd_nbd_handshakes_total", "counter", "NBD connections that entered transmission.")
	sample("raidd_nbd_handshakes_total", nil, float64(n.Handshakes))
	family("raidd_nbd_handshake_failures_total", "counter", "NBD connections closed during the handshake.")
	sample("raidd_nbd_handshake_failures_total", nil, float64(n.HandshakeFailures))
	family("raidd_nbd_tls_handshakes_total", "counter", "TLS handshakes after NBD_OPT_STARTTLS, by result (a failure closes the connection).")
	sample("raidd_nbd_tls_handshakes_total", []string{"result", "ok"}, float64(n.TLSHandshakes))
	sample("raidd_nbd_tls_handshakes_total", []string{"result", "failed"}, float64(n.TLSFailures))
	family("raidd_nbd_refused_connections_total", "counter", "NBD connections refused because nbd.max_connections were open.")
	sample("raidd_nbd_refused_connections_total", nil, float64(n.RefusedConnections))
	family("raidd_nbd_timeouts_total", "counter", "NBD connections closed by a timeout: idle (nbd.idle_timeout) or io (nbd.io_timeout).")
	sample("raidd_nbd_timeouts_total", []string{"timeout", "idle"}, float64(n.IdleTimeouts))
	sample("raidd_nbd_timeouts_total", []string{"timeout", "io"}, float64(n.IOTimeouts))
	family("raidd_nbd_in_flight_bytes", "gauge", "READ and WRITE payload bytes held by NBD requests not yet answered.")
	sample("raidd_nbd_in_flight_bytes", nil, float64(n.InFlightBytes))
	family("raidd_nbd_requests_total", "counter", "NBD requests received, by command.")
	for _, c := range []struct {
		cmd string
		v   int64
	}{
		{"read", n.Reads}, {"write", n.Writes}, {"flush", n.Flushes}, {"trim", n.Trims},
		{"cache", n.Caches}, {"write_zeroes", n.WriteZeroes}, {"disc", n.Disconnects}, {"block_status", n.BlockStatuses}, {"other", n.OtherCommands},
	} {
		sample("raidd_nbd_requests_total", []string{"command", c.cmd}, float64(c.v))
	}
	family("raidd_nbd_read_bytes_total", "counter", "Payload bytes sent in successful NBD READ replies.")
	sample("raidd_nbd_read_bytes_total", nil, float64(n.BytesRead))
	family("raidd_nbd_written_bytes_total", "counter", "Payload bytes written by successful NBD WRITEs.")
	sample("raidd_nbd_written_bytes_total", nil, float64(n.BytesWritten))
	family("raidd_nbd_error_replies_total", "counter", "NBD replies carrying an error.")
	sample("raidd_nbd_error_replies_total", nil, float64(n.ErrorReplies))
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

func escapeLabel(s string) string { return labelEscaper.Replace(s) }
