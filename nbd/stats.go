package nbd

import "sync/atomic"

// Stats is a snapshot of a server's counters since NewServer. Counters are
// updated with atomics and read individually, so a snapshot taken while
// requests run is not a consistent cut.
type Stats struct {
	Connections       int64 // connections accepted or passed to ServeConn
	ActiveConnections int64 // connections not yet closed
	Handshakes        int64 // connections that entered transmission
	HandshakeFailures int64 // connections closed during the handshake without ABORT
	// RefusedConnections counts connections refused because
	// Options.MaxConnections were open.
	RefusedConnections int64
	// IdleTimeouts and IOTimeouts count connections closed by
	// Options.IdleTimeout and Options.IOTimeout.
	IdleTimeouts, IOTimeouts int64
	// TLSHandshakes and TLSFailures count TLS handshakes after
	// NBD_OPT_STARTTLS that succeeded and that failed.
	TLSHandshakes, TLSFailures int64
	// InFlightBytes is the READ and WRITE payload held right now by
	// requests read and not yet answered, on all connections (a gauge).
	InFlightBytes int64

	// Requests received, by command.
	Reads, Writes, Flushes, Trims, Caches, WriteZeroes, Disconnects int64
	BlockStatuses                                                   int64
	// Requests with an unknown command type.
	OtherCommands int64

	BytesRead int64 // payload bytes sent in successful READ replies
	// BytesSpliced is the part of BytesRead sent from the device's files
	// without a copy (Splicer).
	BytesSpliced int64
	BytesWritten int64 // payload bytes written by successful WRITEs
	// BytesStreamed is the part of BytesWritten written to the device
	// while the payload arrived (payload.go).
	BytesStreamed int64
	// BytesReceived is the part of BytesStreamed received straight into
	// the device's memory (Receiver).
	BytesReceived int64
	ErrorReplies  int64 // replies carrying an error, any cause
}

type counters struct {
	connections, active, handshakes, handshakeFailures atomic.Int64
	refused, idleTimeouts, ioTimeouts, inFlight        atomic.Int64
	tlsHandshakes, tlsFailures                         atomic.Int64
	cmds                                               [numCmdCounters]atomic.Int64
	bytesRead, bytesWritten, errorReplies              atomic.Int64
	bytesSpliced, bytesStreamed, bytesReceived         atomic.Int64
}

const numCmdCounters = 9 // cmdRead..cmdBlockStatus (0..7) and "other" (8)

func (c *counters) countCommand(typ uint16) {
	if typ > cmdBlockStatus {
		typ = numCmdCounters - 1
	}
	c.cmds[typ].Add(1)
}

// Stats returns a snapshot of the server's counters.
func (s *Server) Stats() Stats {
	c := &s.stats
	return Stats{
		Connections:        c.connections.Load(),
		ActiveConnections:  c.active.Load(),
		Handshakes:         c.handshakes.Load(),
		HandshakeFailures:  c.handshakeFailures.Load(),
		RefusedConnections: c.refused.Load(),
		IdleTimeouts:       c.idleTimeouts.Load(),
		IOTimeouts:         c.ioTimeouts.Load(),
		TLSHandshakes:      c.tlsHandshakes.Load(),
		TLSFailures:        c.tlsFailures.Load(),
		InFlightBytes:      c.inFlight.Load(),
		Reads:              c.cmds[cmdRead].Load(),
		Writes:             c.cmds[cmdWrite].Load(),
		Flushes:            c.cmds[cmdFlush].Load(),
		Trims:              c.cmds[cmdTrim].Load(),
		Caches:             c.cmds[cmdCache].Load(),
		WriteZeroes:        c.cmds[cmdWriteZeroes].Load(),
		Disconnects:        c.cmds[cmdDisc].Load(),
		BlockStatuses:      c.cmds[cmdBlockStatus].Load(),
		OtherCommands:      c.cmds[numCmdCounters-1].Load(),
		BytesRead:          c.bytesRead.Load(),
		BytesSpliced:       c.bytesSpliced.Load(),
		BytesStreamed:      c.bytesStreamed.Load(),
		BytesReceived:      c.bytesReceived.Load(),
		BytesWritten:       c.bytesWritten.Load(),
		ErrorReplies:       c.errorReplies.Load(),
	}
}
