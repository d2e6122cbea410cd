package nbd

import "github.com/pojntfx/go-nbd/pkg/protocol"

// Wire constants of the NBD protocol, named after doc/proto.md of
// NetworkBlockDevice/nbd. All multi-byte fields are big-endian. Where
// go-nbd's protocol package defines a constant, it is used (its constant
// set is sound, unlike its server); the rest of the protocol is defined here.

// Magic numbers.
const (
	magicInitPasswd      uint64 = protocol.NEGOTIATION_MAGIC_OLDSTYLE // "NBDMAGIC"
	magicIHaveOpt        uint64 = protocol.NEGOTIATION_MAGIC_OPTION   // "IHAVEOPT"
	magicOptReply        uint64 = protocol.NEGOTIATION_MAGIC_REPLY
	magicRequest         uint32 = protocol.TRANSMISSION_MAGIC_REQUEST
	magicSimpleReply     uint32 = protocol.TRANSMISSION_MAGIC_REPLY
	magicStructuredReply uint32 = 0x668e33ef
)

// Handshake flags (server, 16 bits).
const (
	flagFixedNewstyle uint16 = protocol.NEGOTIATION_HANDSHAKE_FLAG_FIXED_NEWSTYLE
	flagNoZeroes      uint16 = 1 << 1
)

// Client flags (32 bits).
const (
	clientFlagFixedNewstyle uint32 = 1 << 0
	clientFlagNoZeroes      uint32 = 1 << 1
	clientFlagsKnown               = clientFlagFixedNewstyle | clientFlagNoZeroes
)

// Transmission flags (16 bits).
const (
	tflagHasFlags        uint16 = protocol.NEGOTIATION_REPLY_FLAGS_HAS_FLAGS
	tflagReadOnly        uint16 = 1 << 1
	tflagSendFlush       uint16 = 1 << 2
	tflagSendFUA         uint16 = 1 << 3
	tflagRotational      uint16 = 1 << 4
	tflagSendTrim        uint16 = 1 << 5
	tflagSendWriteZeroes uint16 = 1 << 6
	tflagSendDF          uint16 = 1 << 7
	tflagCanMultiConn    uint16 = protocol.NEGOTIATION_REPLY_FLAGS_CAN_MULTI_CONN
	tflagSendResize      uint16 = 1 << 9
	tflagSendCache       uint16 = 1 << 10
	tflagSendFastZero    uint16 = 1 << 11
)

// Option types.
const (
	optExportName      uint32 = 1
	optAbort           uint32 = protocol.NEGOTIATION_ID_OPTION_ABORT
	optList            uint32 = protocol.NEGOTIATION_ID_OPTION_LIST
	optPeekExport      uint32 = 4
	optStartTLS        uint32 = 5
	optInfo            uint32 = protocol.NEGOTIATION_ID_OPTION_INFO
	optGo              uint32 = protocol.NEGOTIATION_ID_OPTION_GO
	optStructuredReply uint32 = 8
	optListMetaContext uint32 = 9
	optSetMetaContext  uint32 = 10
)

// Option reply types. Errors have bit 31 set.
const (
	repAck            uint32 = protocol.NEGOTIATION_TYPE_REPLY_ACK
	repServer         uint32 = protocol.NEGOTIATION_TYPE_REPLY_SERVER
	repInfo           uint32 = protocol.NEGOTIATION_TYPE_REPLY_INFO
	repMetaContext    uint32 = 4
	repErrUnsup       uint32 = protocol.NEGOTIATION_TYPE_REPLY_ERR_UNSUPPORTED
	repErrPolicy      uint32 = 1<<31 + 2
	repErrInvalid     uint32 = 1<<31 + 3
	repErrPlatform    uint32 = 1<<31 + 4
	repErrTLSReqd     uint32 = 1<<31 + 5
	repErrUnknown     uint32 = protocol.NEGOTIATION_TYPE_REPLY_ERR_UNKNOWN
	repErrShutdown    uint32 = 1<<31 + 7
	repErrBlockSzReqd uint32 = 1<<31 + 8
	repErrTooBig      uint32 = 1<<31 + 9
)

// Information types of NBD_REP_INFO.
const (
	infoExport      uint16 = protocol.NEGOTIATION_TYPE_INFO_EXPORT
	infoName        uint16 = protocol.NEGOTIATION_TYPE_INFO_NAME
	infoDescription uint16 = protocol.NEGOTIATION_TYPE_INFO_DESCRIPTION
	infoBlockSize   uint16 = 3
)

// Command types.
const (
	cmdRead        uint16 = protocol.TRANSMISSION_TYPE_REQUEST_READ
	cmdWrite       uint16 = protocol.TRANSMISSION_TYPE_REQUEST_WRITE
	cmdDisc        uint16 = protocol.TRANSMISSION_TYPE_REQUEST_DISC
	cmdFlush       uint16 = 3
	cmdTrim        uint16 = 4
	cmdCache       uint16 = 5
	cmdWriteZeroes uint16 = 6
	cmdBlockStatus uint16 = 7
	cmdResize      uint16 = 8
)

// Command flags.
const (
	cmdFlagFUA      uint16 = 1 << 0
	cmdFlagNoHole   uint16 = 1 << 1
	cmdFlagDF       uint16 = 1 << 2
	cmdFlagReqOne   uint16 = 1 << 3
	cmdFlagFastZero uint16 = 1 << 4
)

// Structured reply flags and types.
const (
	replyFlagDone uint16 = 1 << 0

	replyTypeNone        uint16 = 0
	replyTypeOffsetData  uint16 = 1
	replyTypeOffsetHole  uint16 = 2
	replyTypeBlockStatus uint16 = 5
	replyTypeError       uint16 = 1<<15 + 1
	replyTypeErrorOffset uint16 = 1<<15 + 2
)

// Metadata contexts. base:allocation is the only one served; its ID is the
// same on every connection (IDs are opaque to clients).
const (
	metaBaseAllocation          = "base:allocation"
	metaBaseNamespace           = "base:"
	metaIDBaseAllocation uint32 = 1

	stateHole uint32 = 1 << 0 // NBD_STATE_HOLE
	stateZero uint32 = 1 << 1 // NBD_STATE_ZERO
)

// Protocol error values (NBD_E*). They are fixed by the protocol and are
// independent of the host's errno numbering.
const (
	errnoPerm     uint32 = protocol.TRANSMISSION_ERROR_EPERM
	errnoIO       uint32 = 5
	errnoNoMem    uint32 = 12
	errnoInval    uint32 = protocol.TRANSMISSION_ERROR_EINVAL
	errnoNoSpc    uint32 = 28
	errnoOverflow uint32 = 75
	errnoNotSup   uint32 = 95
	errnoShutdown uint32 = 108
)

// Sizes of fixed wire structures.
const (
	requestHeaderLen    = 28
	simpleReplyLen      = 16
	structuredHeaderLen = 20
	optHeaderLen        = 16 // IHAVEOPT + option + length
	optReplyHeaderLen   = 20
)

// Protocol limits.
const (
	// maxStringLen is the spec's hard limit for strings (export names,
	// descriptions, error messages).
	maxStringLen = 4096
	// maxOptionLen caps the option data the server is willing to read into
	// memory. Larger options are refused (NBD_REP_ERR_TOO_BIG) and the
	// connection is dropped without reading the data.
	maxOptionLen = 64 << 10
)

func errnoName(e uint32) string {
	switch e {
	case 0:
		return "OK"
	case errnoPerm:
		return "EPERM"
	case errnoIO:
		return "EIO"
	case errnoNoMem:
		return "ENOMEM"
	case errnoInval:
		return "EINVAL"
	case errnoNoSpc:
		return "ENOSPC"
	case errnoOverflow:
		return "EOVERFLOW"
	case errnoNotSup:
		return "ENOTSUP"
	case errnoShutdown:
		return "ESHUTDOWN"
	default:
		return "E?"
	}
}

func cmdName(t uint16) string {
	switch t {
	case cmdRead:
		return "READ"
	case cmdWrite:
		return "WRITE"
	case cmdDisc:
		return "DISC"
	case cmdFlush:
		return "FLUSH"
	case cmdTrim:
		return "TRIM"
	case cmdCache:
		return "CACHE"
	case cmdWriteZeroes:
		return "WRITE_ZEROES"
	case cmdBlockStatus:
		return "BLOCK_STATUS"
	default:
		return "UNKNOWN"
	}
}
