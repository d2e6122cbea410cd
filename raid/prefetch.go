package raid

import "github.com/raidd/raidd/stripe"

// memberPrefetcher is a member that can bring a range of its memory into
// the CPU's cache ahead of a read (internal/member: File.Prefetch on a
// file held in memory and mapped).
type memberPrefetcher interface {
	Prefetch(off, n int64)
}

// Prefetch is told by the NBD server, as soon as it has parsed a WRITE's
// header and before it receives the payload and hands the request to a
// worker, which part of the array the write covers (nbd.Prefetcher). On a
// parity level a write smaller than a stripe reads before it writes: a
// read-modify-write copies the old data and parity out of the members, a
// reconstruct-write the row's other data. On members held in memory and a
// random workload those are pages out of the cache and the TLB, where the
// copy waits for memory line by line. Prefetch asks the members for the
// ranges that the write's plan will read (exactly, for a write within one
// chunk of a healthy row; a close guess for one across chunks, whose
// parity range is the union of its chunks' ranges) to be brought into
// the cache now
// (internal/member/prefetch.go), so that the wait overlaps the payload's
// receive and the hand-off. It only hints: it takes no lock, touches no
// byte, and costs nothing on other members or levels, or for larger
// writes (whole stripes read nothing).
func (a *Array) Prefetch(off int64, n int) {
	g := a.geo
	if g.Tolerance() == 0 || g.Mirrored() || n <= 0 || int64(n) >= g.StripeWidth() || off < 0 {
		return
	}
	v := a.view.Load()
	chunk, width, dk, tol := g.Chunk(), g.StripeWidth(), g.DataMembers(), g.Tolerance()
	// A write within one chunk of a healthy row reads 1+tol members with
	// a read-modify-write (the old data and parity) and dk-1 with a
	// reconstruct-write (the row's other data chunks over the same range).
	// The plans choose the fewer reads; on a tie RAID5 takes the
	// read-modify-write and RAID6 the reconstruct-write (raid/raid5,
	// raid/raid6).
	rcw := dk-1 < 1+tol || (dk-1 == 1+tol && g.Level() == stripe.RAID6)
	end := min(off+int64(n), g.Size())
	for pos := off; pos < end; {
		row := pos / width
		in := pos - row*width
		i, c := int(in/chunk), in%chunk
		k := min(end-pos, chunk-c)
		at := v.dataOff + row*chunk + c
		if rcw {
			for j := range dk {
				if j != i {
					prefetchOn(v, g.DataMember(row, j), at, k)
				}
			}
		} else {
			prefetchOn(v, g.DataMember(row, i), at, k)
			prefetchOn(v, g.ParityMember(row), at, k)
			if g.Level() == stripe.RAID6 {
				prefetchOn(v, g.QMember(row), at, k)
			}
		}
		pos += k
	}
}

// prefetchOn asks role m's device of v to prefetch [off, off+n), if it
// can.
func prefetchOn(v *View, m int, off, n int64) {
	if m < 0 || m >= len(v.devs) {
		return
	}
	if p, ok := v.devs[m].(memberPrefetcher); ok {
		p.Prefetch(off, n)
	}
}
