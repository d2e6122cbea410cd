package nbd

import (
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"time"
)

// exportInfo is what NBD_INFO_EXPORT (or the NBD_OPT_EXPORT_NAME reply)
// tells the client; the transmission policy is built from exactly this.
type exportInfo struct {
	size   uint64
	tflags uint16
}

// transmissionFlags computes the flags advertised for e. Each flag is set
// only for a feature that is really implemented (see the package doc).
func transmissionFlags(e *export, structured bool) uint16 {
	f := tflagHasFlags | tflagSendCache
	if e.ReadOnly {
		f |= tflagReadOnly
	}
	if e.syncer != nil {
		f |= tflagSendFlush | tflagSendFUA
	}
	if !e.ReadOnly && e.discarder != nil {
		f |= tflagSendTrim
	}
	if !e.ReadOnly && e.zeroer != nil {
		f |= tflagSendWriteZeroes
		if e.fastZeroer != nil && e.fastZeroer.CanFastZero() {
			f |= tflagSendFastZero
		}
	}
	if e.multiConn != nil && e.multiConn.CanMultiConn() {
		f |= tflagCanMultiConn
	}
	if structured {
		// READ replies are always a single content chunk, so DF is honoured.
		f |= tflagSendDF
	}
	return f
}

// info returns the export information for e under the current negotiation
// state. Repeated queries for the same export and state return the cached
// answer, so NBD_OPT_INFO followed by NBD_OPT_GO report identical data even
// if the device's dynamic capabilities change in between.
func (c *conn) info(e *export) exportInfo {
	li := &c.lastInfo
	if li.exp == e && li.structured == c.structured {
		return li.info
	}
	size := e.Device.Size()
	if size < 0 {
		size = 0
	}
	li.exp, li.structured = e, c.structured
	li.info = exportInfo{size: uint64(size), tflags: transmissionFlags(e, c.structured)}
	return li.info
}

// handshake runs the fixed newstyle negotiation. It returns the selected
// export and the information sent for it, or ok == false if the connection
// must be closed (client abort, protocol violation, timeout, shutdown).
func (c *conn) handshake() (e *export, info exportInfo, ok bool) {
	s := c.s
	aborted := false
	defer func() {
		if !ok && !aborted {
			s.stats.handshakeFailures.Add(1)
		}
	}()
	_ = c.nc.SetDeadline(time.Now().Add(s.opts.HandshakeTimeout))
	if s.shutting.Load() {
		return nil, info, false
	}

	var hello [18]byte
	binary.BigEndian.PutUint64(hello[0:], magicInitPasswd)
	binary.BigEndian.PutUint64(hello[8:], magicIHaveOpt)
	binary.BigEndian.PutUint16(hello[16:], flagFixedNewstyle|flagNoZeroes)
	if !c.send(hello[:]) {
		return nil, info, false
	}
	var cf [4]byte
	if !c.recv(cf[:]) {
		return nil, info, false
	}
	clientFlags := binary.BigEndian.Uint32(cf[:])
	if clientFlags&^clientFlagsKnown != 0 {
		c.log.Debug("nbd: unknown client flags; closing", "flags", clientFlags, "err", ErrProtocol)
		return nil, info, false
	}
	c.noZeroes = clientFlags&clientFlagNoZeroes != 0
	// A client that did not reply with NBD_FLAG_C_FIXED_NEWSTYLE gets the
	// spec's NOTLS mode whatever the server's TLS setting: STARTTLS is
	// refused by policy, no option is answered NBD_REP_ERR_TLS_REQD, and
	// a server that requires TLS serves such a client nothing.
	c.noTLS = clientFlags&clientFlagFixedNewstyle == 0 && s.opts.TLSMode != TLSOff

	for {
		var oh [optHeaderLen]byte
		if !c.recv(oh[:]) {
			return nil, info, false
		}
		if binary.BigEndian.Uint64(oh[0:]) != magicIHaveOpt {
			c.log.Debug("nbd: bad option magic; closing", "err", ErrProtocol)
			return nil, info, false
		}
		opt := binary.BigEndian.Uint32(oh[8:])
		length := binary.BigEndian.Uint32(oh[12:])
		if length > maxOptionLen {
			c.log.Debug("nbd: option too large; closing", "option", opt, "length", length, "err", ErrProtocol)
			switch opt {
			case optExportName:
			case optAbort:
				// The spec: ABORT is answered with an ACK, its data
				// ignored; the connection closes after it anyway.
				c.optReply(opt, repAck, nil)
				c.flush()
			default:
				c.optReply(opt, repErrTooBig, []byte("option data too large"))
				c.flush()
			}
			return nil, info, false
		}
		if s.shutting.Load() && opt != optAbort {
			if opt == optExportName {
				return nil, info, false
			}
			if !c.skip(length) {
				return nil, info, false
			}
			c.optReply(opt, repErrShutdown, []byte("server is shutting down"))
			if !c.flush() {
				return nil, info, false
			}
			continue
		}

		if s.opts.TLSMode == TLSRequire && !c.tls && opt != optStartTLS && opt != optAbort {
			if opt == optExportName {
				// No error reply exists for EXPORT_NAME: the spec says
				// to close the connection.
				c.log.Debug("nbd: NBD_OPT_EXPORT_NAME before TLS; closing", "err", ErrTLSRequired)
				return nil, info, false
			}
			if !c.skip(length) {
				return nil, info, false
			}
			if c.noTLS {
				// NOTLS mode, where TLS cannot start and the spec forbids
				// NBD_REP_ERR_TLS_REQD: refused by policy.
				c.optReply(opt, repErrPolicy, []byte("TLS is required, and a client that does not set NBD_FLAG_C_FIXED_NEWSTYLE cannot start it"))
			} else {
				c.optReply(opt, repErrTLSReqd, []byte("TLS is required: send NBD_OPT_STARTTLS first"))
			}
			if !c.flush() {
				return nil, info, false
			}
			continue
		}

		switch opt {
		case optStartTLS:
			if !c.startTLS(length) {
				return nil, info, false
			}
			continue

		case optExportName:
			name, ok := c.readOpt(length)
			if !ok {
				return nil, info, false
			}
			e := s.lookup(name)
			if e == nil {
				c.log.Debug("nbd: EXPORT_NAME for unknown export; closing", "name", string(name), "err", ErrProtocol)
				return nil, info, false
			}
			info := c.info(e)
			var b [10 + 124]byte
			binary.BigEndian.PutUint64(b[0:], info.size)
			binary.BigEndian.PutUint16(b[8:], info.tflags)
			n := len(b)
			if c.noZeroes {
				n = 10
			}
			if !c.send(b[:n]) {
				return nil, info, false
			}
			return e, info, c.enterTransmission(e)

		case optAbort:
			aborted = true
			if c.skip(length) {
				c.optReply(opt, repAck, nil)
				c.flush()
			}
			return nil, info, false

		case optList:
			if length != 0 {
				if !c.skip(length) {
					return nil, info, false
				}
				c.optReply(opt, repErrInvalid, []byte("NBD_OPT_LIST takes no data"))
				break
			}
			for _, ex := range s.exports {
				p := make([]byte, 4, 4+len(ex.Name)+len(ex.Description))
				binary.BigEndian.PutUint32(p, uint32(len(ex.Name)))
				p = append(p, ex.Name...)
				p = append(p, ex.Description...)
				c.optReply(opt, repServer, p)
			}
			c.optReply(opt, repAck, nil)

		case optInfo, optGo:
			data, ok := c.readOpt(length)
			if !ok {
				return nil, info, false
			}
			name, reqs, valid := parseInfoRequest(data)
			if !valid {
				c.optReply(opt, repErrInvalid, []byte("malformed NBD_OPT_INFO/NBD_OPT_GO data"))
				break
			}
			e := s.lookup(name)
			if e == nil {
				c.optReply(opt, repErrUnknown, []byte("unknown export"))
				break
			}
			info := c.info(e)
			c.sendInfo(opt, e, info, reqs)
			c.optReply(opt, repAck, nil)
			if opt == optGo {
				if !c.flush() {
					return nil, info, false
				}
				return e, info, c.enterTransmission(e)
			}

		case optListMetaContext, optSetMetaContext:
			if opt == optSetMetaContext {
				// SET replaces the selection, even when it fails.
				c.meta = metaSelection{}
			}
			data, ok := c.readOpt(length)
			if !ok {
				return nil, info, false
			}
			if opt == optSetMetaContext && !c.structured {
				c.optReply(opt, repErrInvalid, []byte("NBD_OPT_SET_META_CONTEXT requires structured replies"))
				break
			}
			req, valid := parseMetaRequest(data)
			if !valid {
				c.optReply(opt, repErrInvalid, []byte("malformed NBD_OPT_LIST/SET_META_CONTEXT data"))
				break
			}
			e := s.lookup(req.name)
			if e == nil {
				c.optReply(opt, repErrUnknown, []byte("unknown export"))
				break
			}
			c.metaContexts(opt, e, req)

		case optStructuredReply:
			if length != 0 {
				if !c.skip(length) {
					return nil, info, false
				}
				c.optReply(opt, repErrInvalid, []byte("NBD_OPT_STRUCTURED_REPLY takes no data"))
				break
			}
			c.structured = true
			c.optReply(opt, repAck, nil)

		default:
			// Anything unknown: skip exactly the data and keep going.
			if !c.skip(length) {
				return nil, info, false
			}
			c.optReply(opt, repErrUnsup, []byte(fmt.Sprintf("option %d not supported", opt)))
		}
		if !c.flush() {
			return nil, info, false
		}
	}
}

// startTLS answers NBD_OPT_STARTTLS with data length n. With TLS off it
// replies NBD_REP_ERR_UNSUP (the spec's NOTLS mode); with data, or once TLS
// is established, NBD_REP_ERR_INVALID. Otherwise it replies NBD_REP_ACK and
// runs the TLS handshake on the same connection, under the handshake
// deadline already set; the rest of the negotiation and the transmission
// then go over TLS. It returns false if the connection must be closed: the
// TLS handshake failed (a client certificate missing or not signed by the
// CA included), or the client sent bytes after STARTTLS before the ACK,
// which would otherwise be taken as if they came over TLS.
func (c *conn) startTLS(n uint32) bool {
	var typ uint32
	var msg string
	switch {
	case c.s.opts.TLSMode == TLSOff:
		typ, msg = repErrUnsup, "TLS is not configured on this server"
	case c.noTLS:
		typ, msg = repErrPolicy, "TLS needs NBD_FLAG_C_FIXED_NEWSTYLE, which the client did not set"
	case n != 0:
		typ, msg = repErrInvalid, "NBD_OPT_STARTTLS takes no data"
	case c.tls:
		typ, msg = repErrInvalid, "TLS is already established"
	}
	if typ != 0 {
		if !c.skip(n) {
			return false
		}
		c.optReply(optStartTLS, typ, []byte(msg))
		return c.flush()
	}
	c.optReply(optStartTLS, repAck, nil)
	if !c.flush() {
		return false
	}
	if c.br.Buffered() != 0 {
		c.log.Debug("nbd: data sent after NBD_OPT_STARTTLS before its reply; closing", "err", ErrProtocol)
		return false
	}
	tc := tls.Server(c.nc, c.s.opts.TLSConfig)
	if err := tc.Handshake(); err != nil {
		c.s.stats.tlsFailures.Add(1)
		c.log.Debug("nbd: TLS handshake failed; closing", "err", fmt.Errorf("%w: %w", ErrTLSHandshake, err))
		return false
	}
	c.s.stats.tlsHandshakes.Add(1)
	c.tls, c.dc = true, tc
	c.br.Reset(tc)
	c.bw.Reset(tc)
	// Nothing negotiated in plaintext carries over into TLS.
	c.structured = false
	c.meta = metaSelection{}
	c.lastInfo.exp = nil
	c.log.Debug("nbd: TLS established", "version", tls.VersionName(tc.ConnectionState().Version))
	return true
}

// enterTransmission records the metadata context in effect for export e and
// clears the handshake deadline. If shutdown began meanwhile, the read
// deadline is set again so the reader stops at once.
func (c *conn) enterTransmission(e *export) bool {
	// Contexts belong to the export named in the last SET_META_CONTEXT;
	// entering another export leaves none selected.
	if c.structured && c.meta.allocation && c.meta.exp == e {
		c.metaID = metaIDBaseAllocation
	}
	c.rdMu.Lock()
	if !c.stopped {
		_ = c.nc.SetDeadline(time.Time{})
	}
	c.transmitting = true
	c.rdMu.Unlock()
	if c.s.shutting.Load() {
		c.interrupt()
	}
	return true
}

// parseInfoRequest decodes NBD_OPT_INFO/NBD_OPT_GO data: a 32-bit name
// length, the name, a 16-bit count and that many 16-bit information
// requests. The data length must match exactly.
func parseInfoRequest(data []byte) (name []byte, reqs []byte, ok bool) {
	if len(data) < 6 {
		return nil, nil, false
	}
	nameLen := uint64(binary.BigEndian.Uint32(data))
	if nameLen > uint64(len(data)-6) {
		return nil, nil, false
	}
	name = data[4 : 4+nameLen]
	rest := data[4+nameLen:]
	count := int(binary.BigEndian.Uint16(rest))
	reqs = rest[2:]
	if len(reqs) != 2*count {
		return nil, nil, false
	}
	return name, reqs, true
}

// metaSelection is the result of the last NBD_OPT_SET_META_CONTEXT: the
// export it named and whether base:allocation was selected for it.
type metaSelection struct {
	exp        *export
	allocation bool
}

// metaRequest is decoded NBD_OPT_LIST/SET_META_CONTEXT data.
type metaRequest struct {
	name    []byte
	count   uint32
	queries []byte // count queries, each a 32-bit length and the string; validated
}

// parseMetaRequest decodes NBD_OPT_LIST/SET_META_CONTEXT data: a 32-bit
// export name length, the name, a 32-bit query count, and that many queries,
// each a 32-bit length and the query string. Every length is checked against
// the data actually present, and the data must end exactly after the last
// query. Nothing is allocated, whatever the count claims.
func parseMetaRequest(data []byte) (r metaRequest, ok bool) {
	if len(data) < 8 {
		return r, false
	}
	nameLen := uint64(binary.BigEndian.Uint32(data))
	if nameLen > uint64(len(data)-8) {
		return r, false
	}
	r.name = data[4 : 4+nameLen]
	rest := data[4+nameLen:]
	r.count = binary.BigEndian.Uint32(rest)
	r.queries = rest[4:]
	p := r.queries
	for range r.count { // each query consumes >= 4 bytes, so this ends soon
		if len(p) < 4 {
			return r, false
		}
		ql := uint64(binary.BigEndian.Uint32(p))
		if ql > uint64(len(p)-4) {
			return r, false
		}
		p = p[4+ql:]
	}
	return r, len(p) == 0
}

// each calls fn for every query of a validated request.
func (r metaRequest) each(fn func(q []byte)) {
	p := r.queries
	for range r.count {
		ql := binary.BigEndian.Uint32(p)
		fn(p[4 : 4+ql])
		p = p[4+ql:]
	}
}

// metaContexts answers NBD_OPT_LIST_META_CONTEXT or NBD_OPT_SET_META_CONTEXT
// for export e with a valid request: one NBD_REP_META_CONTEXT for
// base:allocation if it is offered for e and matched, then NBD_REP_ACK.
// base:allocation is offered only when the device is a BlockStatuser. LIST
// matches it with no queries at all, with "base:" (the namespace wildcard) or
// with its name; SET selects it only by name, and SET with no queries
// selects nothing. Any other query, including unknown namespaces and
// strings without a colon, matches nothing and is not an error. LIST
// replies carry context ID 0 as the spec asks; SET replies carry the ID
// BLOCK_STATUS replies will use.
func (c *conn) metaContexts(opt uint32, e *export, r metaRequest) {
	list := opt == optListMetaContext
	found := false
	if e.statuser != nil {
		if list && r.count == 0 {
			found = true
		}
		r.each(func(q []byte) {
			if string(q) == metaBaseAllocation || list && string(q) == metaBaseNamespace {
				found = true
			}
		})
	}
	if found {
		var id uint32
		if !list {
			id = metaIDBaseAllocation
			c.meta = metaSelection{exp: e, allocation: true}
		}
		p := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(metaBaseAllocation)), id)
		c.optReply(opt, repMetaContext, append(p, metaBaseAllocation...))
	}
	c.optReply(opt, repAck, nil)
}

// sendInfo sends the NBD_REP_INFO replies for e: NBD_INFO_EXPORT and
// NBD_INFO_BLOCK_SIZE always (the server enforces its block sizes whether or
// not the client asked), NBD_INFO_NAME and NBD_INFO_DESCRIPTION when
// requested (the description only if not empty).
func (c *conn) sendInfo(opt uint32, e *export, info exportInfo, reqs []byte) {
	var wantName, wantDesc bool
	for i := 0; i+1 < len(reqs); i += 2 {
		switch binary.BigEndian.Uint16(reqs[i:]) {
		case infoName:
			wantName = true
		case infoDescription:
			wantDesc = true
		}
	}
	var b [14]byte
	binary.BigEndian.PutUint16(b[0:], infoExport)
	binary.BigEndian.PutUint64(b[2:], info.size)
	binary.BigEndian.PutUint16(b[10:], info.tflags)
	c.optReply(opt, repInfo, b[:12])

	binary.BigEndian.PutUint16(b[0:], infoBlockSize)
	binary.BigEndian.PutUint32(b[2:], e.minBlock)
	binary.BigEndian.PutUint32(b[6:], e.prefBlock)
	binary.BigEndian.PutUint32(b[10:], e.maxBlock)
	c.optReply(opt, repInfo, b[:14])

	if wantName {
		p := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(e.Name)), infoName)
		c.optReply(opt, repInfo, append(p, e.Name...))
	}
	if wantDesc && e.Description != "" {
		p := binary.BigEndian.AppendUint16(make([]byte, 0, 2+len(e.Description)), infoDescription)
		c.optReply(opt, repInfo, append(p, e.Description...))
	}
}

// optReply buffers one option reply. Errors surface at the next flush.
func (c *conn) optReply(opt, typ uint32, data []byte) {
	var h [optReplyHeaderLen]byte
	binary.BigEndian.PutUint64(h[0:], magicOptReply)
	binary.BigEndian.PutUint32(h[8:], opt)
	binary.BigEndian.PutUint32(h[12:], typ)
	binary.BigEndian.PutUint32(h[16:], uint32(len(data)))
	_, _ = c.bw.Write(h[:])
	_, _ = c.bw.Write(data)
}

func (c *conn) send(b []byte) bool {
	_, _ = c.bw.Write(b)
	return c.flush()
}

func (c *conn) flush() bool {
	if err := c.bw.Flush(); err != nil {
		c.log.Debug("nbd: handshake write failed", "err", err)
		return false
	}
	return true
}

func (c *conn) recv(b []byte) bool {
	if _, err := io.ReadFull(c.br, b); err != nil {
		c.log.Debug("nbd: handshake read failed", "err", err)
		return false
	}
	return true
}

func (c *conn) skip(n uint32) bool {
	if _, err := c.br.Discard(int(n)); err != nil {
		c.log.Debug("nbd: handshake read failed", "err", err)
		return false
	}
	return true
}

// readOpt reads n (<= maxOptionLen) bytes of option data into a reused
// buffer. The result is valid until the next call.
func (c *conn) readOpt(n uint32) ([]byte, bool) {
	if cap(c.optBuf) < int(n) {
		c.optBuf = make([]byte, n)
	}
	b := c.optBuf[:n]
	return b, c.recv(b)
}
