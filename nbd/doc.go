// Package nbd is a Network Block Device server: the fixed newstyle
// handshake, the transmission phase with pipelined requests, and the mapping
// of device errors to protocol errors. It follows doc/proto.md of
// NetworkBlockDevice/nbd and serves any Device; it does not know about RAID.
//
// # Connection architecture
//
// Each connection is served by one goroutine. During the handshake it reads
// options and writes option replies under a deadline (Options.HandshakeTimeout),
// so a stalled client only holds its own goroutine. Once an export is chosen
// (NBD_OPT_GO or NBD_OPT_EXPORT_NAME) the goroutine becomes the request
// reader and starts Options.Workers worker goroutines:
//
//   - The reader parses each 28-byte request header and validates it (see
//     validation order below). Invalid requests are answered directly by the
//     reader; a rejected WRITE's payload is discarded from the stream in place
//     (never buffered, whatever its length) so the stream stays in sync.
//     For valid READ and WRITE requests the reader first takes length bytes
//     from the connection's bound and from the server-wide budget (see
//     "Resource bounds"; the reader blocks while they are exhausted), then
//     takes a buffer from a size-class sync.Pool, reads the WRITE payload
//     into it, and queues the request to the workers through a channel of
//     capacity Workers. A WRITE without FUA to a Device that says its
//     writes never wait for a device (InlineWriter: raidd over tmpfs
//     members) is executed and answered by the reader itself before it
//     reads the next request: no hand-off to a worker (a goroutine wake-up,
//     often a thread switch), at the price of that connection's writes
//     running one at a time. A Device may answer per write instead
//     (InlineWriterAt, asked with the WRITE's offset and length). Such a
//     WRITE of 256 KiB or more, on a plain unix or TCP connection, is
//     written to the Device piece by piece while its payload arrives
//     (payload.go): whenever the socket is empty and a whole 64 KiB piece
//     has arrived unwritten, the reader writes it before it waits for
//     more, so the copy into the Device fills the time it would have
//     waited for the client. The WRITE is still answered once, after its
//     last piece (Options.NoStreamWrites turns this off). A Device that
//     can take the bytes in its own memory (Receiver: raidd's RAID0,
//     RAID5 and RAID6 of members held in memory) is handed the rest of the
//     payload once the reader's buffer is spent: it names the memory the
//     bytes go to (a parity array names the server's own buffer for its
//     pieces of partial stripes, its members for the whole stripes), the
//     reader fills it with vectored reads from the socket, and the copy
//     from a server buffer into the Device is not made. Whatever the
//     Device does not take (it declines, stops early, or its memory
//     faults: EFAULT) is streamed as above (Options.NoReceive turns this
//     off; Stats.BytesReceived counts the bytes placed outside the
//     server's buffer). After such a WRITE of 128 KiB or more the reader
//     reads the next request's header alone instead of a buffer's worth
//     (conn.exactHeader), so that in a stream of large WRITEs the next
//     payload is not half in the reader's buffer: it goes from the socket
//     to the Device whole, at the same one read for the header.
//     So is a READ the Device says is a copy out of memory (InlineReader:
//     raidd reads of at most 64 KiB over memory members). A WRITE that goes
//     to the workers is announced to a Device that asks (Prefetcher) as
//     soon as its header is parsed, before its payload is read: raidd's
//     parity arrays then have the members bring what the write will read
//     into the CPU's cache while the payload arrives.
//   - Workers execute requests concurrently against the Device and write
//     replies. Replies go out in completion order, not request order; the
//     client's handle is echoed untouched.
//   - Replies are serialized by a mutex around one bufio.Writer. The last
//     goroutine to leave the writer flushes it, so bursts of replies share
//     syscalls and no reply waits in the buffer, except the replies the
//     reader holds while it has more requests to serve without waiting
//     (holdReplies): on unix and TCP connections it reads the socket
//     itself, without blocking, and sends them when a read finds the
//     socket empty, before it waits (sockread.go), or after 16. Reply headers are encoded
//     into the writer's free space, so the steady state allocates nothing.
//     A READ reply of 64 KiB or more bypasses the buffer: header and data go
//     out in one writev. On a unix socket the kernel send buffer is raised to
//     2 MiB (capped by net.core.wmem_max; never lowered) when transmission
//     starts, so that a 1 MiB reply fits in that one writev instead of
//     going out in 208 KiB pieces with a wait for the client between them
//     (a goroutine park, a poller wake-up and a thread switch each, which
//     cost more CPU than copying the data). This is kernel memory charged
//     to the socket, not raidd's resident memory, and only fills while a
//     client does not read its replies (bounded in time by IOTimeout). TCP
//     is left to the kernel's send buffer autotuning.
//   - A READ of 64 KiB to 1 MiB of a Device that names the files holding it
//     (Splicer: raidd arrays of page-cache files) is sent without a copy on
//     plain unix and TCP connections: the worker splices the file ranges
//     into a pipe of its connection (references to the page-cache pages),
//     and the reply writer splices the pipe into the socket after the
//     header (splice.go). The whole payload is staged before the header is
//     written, so a range that cannot be staged makes the request fall back
//     to ReadAt with nothing sent. Stats.BytesSpliced counts these bytes.
//   - A READ is executed completely before any byte of its reply is written,
//     so a device error is always an error reply, never a disconnect.
//   - Options.Hold is called for each connection in transmission; raidd
//     serve uses it to keep the Go runtime's system monitor out of its
//     deep sleep (package internal/awake). A reader that waits for the pieces of a payload
//     leaves every processor idle many times per request; each time the
//     monitor went into a deep sleep, and the next system call woke it
//     into 20 µs polling, about a fifth of raidd's CPU on sequential
//     writes over tmpfs. raidd serve sets it.
//
// The connection ends on NBD_CMD_DISC (requests received before it are
// executed and answered, DISC gets no reply), on EOF or any read error, on a
// bad request magic (protocol violation), on a failed reply write (the
// connection is closed), on the idle or I/O timeout, or on shutdown. In every case the reader stops, the
// queued requests are executed, the workers exit, and the socket is closed;
// one connection's failure never affects another.
//
// # Resource bounds
//
// Memory held for clients is bounded whatever they do:
//
//   - Payload bytes. A READ or WRITE takes its length from the connection's
//     bound (Options.MaxInFlightBytes) and then from the server-wide budget
//     (Options.MaxTotalInFlightBytes, a FIFO byte semaphore) before its
//     buffer is allocated, and gives them back once its reply has been
//     written. A WRITE payload is therefore never buffered before there is
//     room for it: a reader without budget stops reading, and TCP pushes
//     back on the client. Requests of at most 128 KiB may instead use a
//     per-connection reserve of 128 KiB outside the budget, so small I/O
//     from any client proceeds while large requests exhaust the budget.
//     No request can exceed the budget: Options.Validate requires it to be
//     at least MaxPayload, the largest READ or WRITE served. The
//     connection's bound defaults to half the budget (at least MaxPayload),
//     so one client that stops reading its replies holds at most half of
//     it until IOTimeout, and the other half serves the other clients.
//   - No deadlock: only readers wait for bytes, and bytes are held only by
//     requests that need no further bytes to finish (executing on the
//     device or writing their reply). A reader waiting for bytes gives up
//     when its connection is halted (shutdown, failed reply write).
//   - Time. A client that stops reading replies, or trickles a WRITE
//     payload, would keep its bytes forever; Options.IOTimeout bounds both
//     (the write deadline is refreshed only when less than 7/8 of it is
//     left, which keeps the system call off most replies). A payload that
//     is already buffered needs no deadline. The optional
//     Options.IdleTimeout closes a connection with nothing in flight that
//     sends no request; it is off by default because the Linux kernel
//     client keeps idle connections open and does not reconnect.
//   - Connections. Options.MaxConnections bounds the connections in the
//     handshake or transmission; each holds two 128 KiB socket buffers and
//     Workers+1 goroutines. One beyond the limit is refused as the
//     protocol asks of a server that will not serve a client: it is greeted
//     and every option answered with NBD_REP_ERR_POLICY and a message
//     naming the limit (NBD_OPT_EXPORT_NAME, which has no error reply,
//     closes it), with no buffers of its own and under the handshake
//     deadline. At most 16 refusals run at once; beyond them connections
//     are closed at accept, which the protocol allows against a denial of
//     service. A warning is logged at most every 10 s.
//
// Altogether the payload buffers in use stay below MaxTotalInFlightBytes +
// MaxConnections x 128 KiB, plus MaxConnections x 256 KiB of socket
// buffers. Released buffers go back to a sync.Pool, and the garbage
// collector frees them; the resident size therefore also includes what
// the GC has not reclaimed yet. bench/conn-memory.sh shows the bound against the attacks of
// issue 7 with the real binary. Stats reports the bytes in flight, refused
// connections and the connections closed by each timeout.
//
// # Handshake
//
// The server sends NBD_FLAG_FIXED_NEWSTYLE|NBD_FLAG_NO_ZEROES and closes the
// connection if the client sets any other flag. Options:
//
//   - NBD_OPT_EXPORT_NAME: no error path; an unknown export closes the
//     connection. The 124 zero bytes are omitted if NO_ZEROES was negotiated.
//   - NBD_OPT_INFO / NBD_OPT_GO: NBD_INFO_EXPORT and NBD_INFO_BLOCK_SIZE are
//     always sent, NBD_INFO_NAME and NBD_INFO_DESCRIPTION when requested.
//     Unknown export: NBD_REP_ERR_UNKNOWN; malformed data: NBD_REP_ERR_INVALID.
//     The answer for an export is computed once per connection and
//     negotiation state, so INFO followed by GO reports identical data.
//   - NBD_OPT_LIST (one NBD_REP_SERVER per export, the description as its
//     human-readable detail), NBD_OPT_ABORT (ACK, then close),
//     NBD_OPT_STRUCTURED_REPLY.
//   - NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT, with the
//     base:allocation context; see "Block status" below.
//   - NBD_OPT_STARTTLS: see "TLS" below.
//   - Everything else gets NBD_REP_ERR_UNSUP after its data is skipped
//     exactly.
//   - Option data above 64 KiB is never read: the server replies
//     NBD_REP_ERR_TOO_BIG (except for EXPORT_NAME, which has no error path) and
//     disconnects.
//   - An empty export name selects the first export.
//
// # TLS
//
// Options.TLSMode selects the spec's TLS behaviour; Options.TLSConfig is the
// crypto/tls server configuration (at least TLS 1.2; TLS 1.3 is preferred by
// crypto/tls).
//
//   - TLSOff (NOTLS mode): NBD_OPT_STARTTLS gets NBD_REP_ERR_UNSUP.
//   - TLSOn: STARTTLS is offered and clients that never ask for it are
//     served in plaintext (a SELECTIVETLS server without TLS-only exports).
//   - TLSRequire (FORCEDTLS mode): before TLS, every option except STARTTLS
//     and NBD_OPT_ABORT is answered NBD_REP_ERR_TLS_REQD after its data is
//     skipped (NBD_OPT_INFO, GO, LIST, STRUCTURED_REPLY, the meta-context
//     options and unknown options alike), and NBD_OPT_EXPORT_NAME, which has
//     no error reply, closes the connection.
//
// A client that did not reply NBD_FLAG_C_FIXED_NEWSTYLE is in NOTLS mode
// whatever the mode, as the spec requires: STARTTLS gets
// NBD_REP_ERR_POLICY, and under TLSRequire so does every other option
// (never NBD_REP_ERR_TLS_REQD, which NOTLS forbids), so it is served
// nothing; under TLSOn it is served in plaintext.
//
// STARTTLS with option data, or once TLS is established, gets
// NBD_REP_ERR_INVALID. Otherwise the server replies NBD_REP_ACK and runs
// the TLS handshake on the same connection, within HandshakeTimeout; the
// rest of the negotiation and the whole transmission then go over the
// tls.Conn. A failed TLS handshake closes the connection, as the spec
// requires; so does a client that sent bytes after STARTTLS before reading
// the ACK, since those bytes arrived in plaintext and must not be taken as
// protected. Nothing negotiated before STARTTLS (structured replies, the
// meta context) carries over into TLS. Client certificates are verified
// when TLSConfig asks for it: raidd sets ClientAuth to
// tls.RequireAndVerifyClientCert with the configured CA pool, and asks for
// no client certificate without one. Stats counts TLS handshakes and their
// failures. Deadlines are set on the underlying connection, which bounds the
// TLS layer too.
//
// # What is advertised
//
// A flag is set only when the feature is really implemented for the export:
//
//	HAS_FLAGS          always
//	READ_ONLY          Export.ReadOnly
//	SEND_FLUSH, SEND_FUA  Device implements Syncer
//	SEND_TRIM          Discarder, and the export is writable
//	SEND_WRITE_ZEROES  Zeroer, and the export is writable
//	SEND_FAST_ZERO     additionally FastZeroer.CanFastZero() true at negotiation
//	SEND_CACHE         always (served by Cacher, or validated and acknowledged)
//	CAN_MULTI_CONN     MultiConner.CanMultiConn() true at negotiation
//	SEND_DF            when structured replies were negotiated: every READ reply
//	                   carries at most one content chunk, so DF holds trivially
//
// RESIZE and ROTATIONAL are not advertised. BLOCK_STATUS has no transmission
// flag: it is negotiated with NBD_OPT_SET_META_CONTEXT, and only offered for
// a BlockStatuser (see "Block status"). NBD_INFO_BLOCK_SIZE
// announces the device's BlockSizer values (default 1, 4096, 32 MiB) after
// normalization: the maximum is capped by Options.MaxPayload and rounded down
// to a multiple of the minimum, and the preferred size, which the protocol
// requires to be a power of two, is rounded up to one (a RAID5 stripe of three
// 512 KiB chunks, 1.5 MiB, is announced as 2 MiB) and kept at or below the
// maximum.
//
// # Request validation and errors
//
// Each request is validated once, by the reader, in this order (the first
// failure wins):
//
//  1. unknown command, or BLOCK_STATUS without a selected base:allocation
//     context: EINVAL (only WRITE carries a payload; every other command,
//     known or not, is treated as payload-free)
//  2. a command flag not valid for the command, or not negotiated (FUA without
//     SEND_FUA, DF without structured replies, FAST_ZERO without
//     SEND_FAST_ZERO, NO_HOLE outside WRITE_ZEROES, REQ_ONE outside
//     BLOCK_STATUS, ...): EINVAL
//  3. WRITE, TRIM or WRITE_ZEROES on a read-only export: EPERM
//  4. FLUSH, TRIM or WRITE_ZEROES not advertised: EINVAL; FLUSH with a
//     nonzero offset or length: EINVAL
//  5. range outside the export, including offsets >= 2^63 and offset+length
//     wrapping past 2^64 (offsets are handled as uint64 and never converted
//     before this check): ENOSPC for WRITE and WRITE_ZEROES, EINVAL for READ,
//     TRIM, CACHE and BLOCK_STATUS
//  6. offset or length not a multiple of the minimum block size: EINVAL
//  7. BLOCK_STATUS with length 0: EINVAL (the spec leaves it unspecified, and
//     no reply could describe it: extents are nonzero and, with REQ_ONE, no
//     longer than the request)
//  8. READ or WRITE longer than the maximum block size: EOVERFLOW. The spec
//     suggests EINVAL here and reserves EOVERFLOW for DF reads; raidd's
//     users asked for EOVERFLOW so that "too big" is told apart from
//     "malformed". The payload is consumed either way and the connection
//     stays usable. WRITE_ZEROES and CACHE longer than the maximum block
//     size are served, as nbdkit serves them: the spec forbids clients to
//     send them and suggests (SHOULD) EINVAL, but they carry no payload,
//     so the limit protects nothing, and an engine that zeroes a whole
//     range at once (holes, metadata) is faster for taking it whole; a
//     client that ignores the limit loses nothing by being served.
//
// Zero-length READ, WRITE, TRIM, WRITE_ZEROES and CACHE requests inside the
// export (offset <= size) succeed without reaching the device; the spec
// leaves them unspecified but forbids disconnecting. BLOCK_STATUS has no
// maximum length (the spec limits only READ, WRITE, CACHE and WRITE_ZEROES,
// of which rule 8 enforces READ and WRITE). After shutdown has
// begun, every request read gets ESHUTDOWN.
//
// Device errors are classified with errors.As(err, &syscall.Errno):
//
//	EPERM, EACCES, EROFS     -> EPERM
//	ENOSPC, EDQUOT, EFBIG    -> ENOSPC
//	EINVAL                   -> EINVAL
//	EOVERFLOW                -> EOVERFLOW
//	ESHUTDOWN                -> ESHUTDOWN
//	ENOTSUP, EOPNOTSUPP      -> see below
//	anything else            -> EIO
//
// The spec allows ENOTSUP only for WRITE_ZEROES with FAST_ZERO. So ENOTSUP
// from Discard or Cache (both advisory) is reported as success; from
// WriteZeroes without FAST_ZERO it makes the server write zero buffers with
// WriteAt instead; with FAST_ZERO it is passed on (and the server itself
// answers ENOTSUP at once, without calling the device, when CanFastZero is
// false, when the device says through FastZeroerAt that zeroing this
// range is not fast (raidd's parity arrays: a range that covers no whole
// stripe), or when NO_HOLE is set too and the device does not say, through
// FastNoHoleZeroer, that keeping the space allocated is also fast);
// anywhere else it becomes EINVAL.
//
// With structured replies, errors are sent as NBD_REPLY_TYPE_ERROR chunks
// with a short message; a READ that fails after the device returned n good
// bytes sends those bytes as an OFFSET_DATA chunk followed by an ERROR_OFFSET
// chunk at offset+n. Successful replies to commands other than READ and
// BLOCK_STATUS are simple replies, which the spec allows. Every error leaves
// the connection usable.
//
// # Block status
//
// An export whose Device implements BlockStatuser offers the base:allocation
// metadata context; no other context exists.
//
//   - NBD_OPT_LIST_META_CONTEXT (allowed with or without structured replies)
//     lists base:allocation, with context ID 0, when the export offers it and
//     there are no queries, or a query is "base:" (the namespace wildcard) or
//     "base:allocation". Other queries (unknown namespaces, unknown base:
//     leaves, strings without a colon) match nothing and are not errors. An
//     export without the capability lists nothing; the reply is just ACK.
//   - NBD_OPT_SET_META_CONTEXT requires structured replies first
//     (NBD_REP_ERR_INVALID otherwise, as the spec says). It selects
//     base:allocation only when a query is exactly "base:allocation" and the
//     export offers it, answering NBD_REP_META_CONTEXT with context ID 1
//     (the same on every connection), then ACK. "base:", unknown contexts
//     and zero queries select nothing (just ACK). Every SET replaces the
//     previous selection, even when it fails.
//   - Both parse the data strictly: name length, name, query count, and each
//     query's length and string must fit the option length exactly;
//     otherwise NBD_REP_ERR_INVALID. An unknown export gets
//     NBD_REP_ERR_UNKNOWN. Negotiation continues after either.
//   - The selection belongs to the export named in the last SET (an empty
//     name meaning the default export, as elsewhere). NBD_OPT_GO or
//     NBD_OPT_EXPORT_NAME for any other export enters transmission with no
//     context, and BLOCK_STATUS then gets EINVAL.
//
// A valid NBD_CMD_BLOCK_STATUS (REQ_ONE and, if negotiated, FUA are the
// flags allowed) is answered with one NBD_REPLY_TYPE_BLOCK_STATUS chunk
// marked DONE: the context ID, then descriptors built by calling
// BlockStatus from the request offset on. Holes are reported as
// NBD_STATE_HOLE|NBD_STATE_ZERO, data as 0. Consecutive runs in the same
// state are merged; every length is a multiple of the minimum block size (a
// minimum block is a hole only if all its bytes are); the extents never go
// past the requested range (the spec would allow the last one to), so every
// length fits in 32 bits. With REQ_ONE there is exactly one extent, no
// longer than the request. Otherwise at most 1024 extents and 4096 device
// calls are spent per request; the reply may then describe only a prefix,
// which the spec allows (at least one extent is always sent). All device
// calls finish before the reply is written: a device error becomes an
// error chunk (EIO for an unclassified error, see above), and an
// ENOTSUP/EOPNOTSUPP from BlockStatus reports the rest of the range as
// data, which is always truthful.
//
// # Durability: FLUSH, FUA and CAN_MULTI_CONN
//
// The server keeps no data cache: a WRITE is replied to after Device.WriteAt
// returned, and the reply may precede durability, as the protocol allows.
//
//   - FLUSH calls Syncer.Sync and replies after it returns. Because a write is
//     only replied to after WriteAt returned, every write replied to before
//     the FLUSH was received returned before Sync was called, so Sync's
//     contract (everything that returned before it is durable) covers exactly
//     what the protocol requires.
//   - FUA on WRITE uses FUAWriter.WriteAtFUA if present, else WriteAt then
//     Sync; on TRIM and WRITE_ZEROES the operation is followed by Sync. The
//     reply waits for it. FUA on READ, FLUSH and CACHE is accepted and
//     ignored (nothing is written).
//   - CAN_MULTI_CONN promises that a FLUSH or FUA reply on one connection
//     makes the writes acknowledged on every connection durable and visible.
//     Since this server has no per-connection cache, that holds exactly when
//     the device's Sync covers writes issued through any caller and all
//     callers read the same data, which is what MultiConner must confirm. For
//     a RAID array that means Sync fdatasyncs every member (and any bitmap or
//     log) no matter which connection wrote.
//
// # Shutdown
//
// Server.Shutdown closes the listeners, fails handshakes at once, closes
// refused connections, answers queued requests that have not started with
// ESHUTDOWN, and lets executing requests finish and reply. A connection in
// transmission goes on reading for shutdownDrain (250 ms): each request it
// reads then, those the client sent before it could know, is answered
// with ESHUTDOWN (a WRITE's payload read and dropped), as the protocol
// asks, and the client's NBD_CMD_DISC, its answer to ESHUTDOWN, ends the
// connection at once. Then the reader is halted (a request waiting for
// payload bytes or for budget gets ESHUTDOWN), and the connection closes
// once its replies are sent. Before, the reader stopped at once, and the
// requests still in the socket went unanswered under a reset.
package nbd
