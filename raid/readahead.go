package raid

import (
	"sync/atomic"

	"github.com/raidd/raidd/stripe"
)

// Read-ahead of a member's next data chunk (issue 9; bench/README.md,
// "disks.sh: RAID6 sequential reads"). On a parity level a member's data
// lies in runs of rows between its parity chunks, and a run can cross the
// place where a client's sequential requests end: RAID6×4 gives each
// member 2-row runs, and member 2's run crosses the 4-row boundary where
// every 1 MiB-aligned request ends, so it read rows 0, 3–4 and 7 of each
// request apart, 3 disk operations per 256 KiB where the others took 2,
// and capped the array at 1000/3 MiB/s per member of 1000 IOPS. The
// member's read queue merges the two halves of such a run when they wait
// at the same time, which they do only while the member has a backlog.
//
// So when a client read follows an earlier one (it starts where one of
// the last few ended: a sequential stream) and a member read of it ends
// where the member's next chunks hold data the next request of the same
// size will ask of that member, and nothing else of that member's, Op.Run
// asks the member to read those chunks too, in the same preadv, into its
// read-ahead (member.File.ReadvAhead), which serves the next request's
// read of them from memory. The member, which sees every write to itself,
// keeps the read-ahead coherent (a sequence lock over its writes: any
// write voids it) and decides whether it is worth reading at all (not if
// another read has those bytes or is about to). Only whole runs are read
// ahead, up to aheadMaxChunks chunks: a longer run would still cost the
// next request a read of its rest, so reading part of it ahead saves no
// operation (RAID0's 1 MiB requests, 4 chunks per member, never read
// ahead). Mirrored levels read each stretch from a copy chosen per request
// and never read ahead. Random reads never start where another ended.

// aheadMaxChunks is the longest run of a member's chunks read ahead.
const aheadMaxChunks = 2

// aheadReader is a member that can read ahead (member.File in direct mode).
type aheadReader interface {
	ReadvAhead(bufs [][]byte, off, ahead int64) (int, error)
}

// canReadAhead reports whether member dev reads ahead when asked:
// it says so and its reads wait for a device (a direct member). A
// checksummed member does not: its reads are verified by its wrapper.
func canReadAhead(dev Member) bool {
	_, ok := dev.(aheadReader)
	return ok && direct(dev)
}

// streamSlots is how many recent client read ends readStreams keeps: the
// sequential streams it tells apart.
const streamSlots = 8

// readStreams remembers where the last client reads ended.
type readStreams struct {
	ends [streamSlots]atomic.Int64
	next atomic.Uint32
}

func (s *readStreams) init() {
	for i := range s.ends {
		s.ends[i].Store(-1)
	}
}

// follows records the read [off, off+n) and reports whether it starts
// where one of the last streamSlots reads ended.
func (s *readStreams) follows(off, n int64) bool {
	seq := false
	for i := range s.ends {
		if s.ends[i].Load() == off {
			seq = true
			break
		}
	}
	s.ends[s.next.Add(1)%streamSlots].Store(off + n)
	return seq
}

// planAhead sets the read-ahead of each member read of the batch that
// ends where the member's next chunks hold the next request's bytes
// (op.nextOff, op.nextN), on members that read ahead. Run calls it for
// the reads of a sequential client stream.
func (op *Op) planAhead() {
	for i := range op.batch {
		r := &op.batch[i]
		if r.kind != ioRead || r.merged || r.repl || r.repair || !canReadAhead(r.dev) {
			continue
		}
		end := r.off + r.n
		if r.vec != nil { // the reads merged into it follow it
			end = r.off
			for _, b := range r.vec {
				end += int64(len(b))
			}
		}
		r.ahead = aheadRun(op.geo, r.m, end-op.v.dataOff, op.nextOff, op.nextOff+op.nextN)
	}
}

// aheadRun returns how many bytes to read ahead on member m after a read
// that ends at data-region offset end, for a stream whose next request
// reads array bytes [lo, hi): the member's chunks from end on that hold
// data inside [lo, hi), when they are the member's whole run there (the
// chunk after them holds none of [lo, hi)) and at most aheadMaxChunks
// chunks; 0 when there is no such run or it is longer.
func aheadRun(g stripe.Geometry, m int, end, lo, hi int64) int64 {
	chunk := g.Chunk()
	if g.Mirrored() || end%chunk != 0 || hi <= lo {
		return 0
	}
	size := g.MemberSize()
	n := int64(0)
	for at := end; at < size; at += chunk {
		a, role := g.Locate(m, at)
		if role != stripe.RoleData || a < lo || a >= hi || a >= g.Size() {
			break // the run ends here
		}
		if at-end == aheadMaxChunks*chunk {
			return 0 // longer than a read-ahead
		}
		if hi-a < chunk {
			return n + hi - a // the request ends inside this chunk
		}
		n += chunk
	}
	return n
}
