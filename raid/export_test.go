package raid

import "github.com/raidd/raidd/raid/internal/clock"

// WithClock returns o with the array's time source set to c (tests only):
// the rebuild rate limiter, the clean marking and the rebuild checkpoints
// then wait on c.
func WithClock(o Options, c clock.Clock) Options {
	o.clock = c
	return o
}

// FailRole marks role m failed as if an I/O error had hit it (tests only).
func (a *Array) FailRole(m int, err error) {
	a.lockConfig()
	defer a.unlockConfig()
	errs := make([]error, a.geo.Members())
	errs[m] = err
	a.markFailedLocked(a.view.Load(), 1<<uint(m), errs)
}

// Abandon stops the array as a power cut would: no sync, no clean marking,
// members left open (tests only).
func (a *Array) Abandon() {
	a.shutdown()
	close(a.reqs)
	a.workers.Wait()
	a.stopEvents()
}

// Charged returns the bytes charged to the rate limiter of background jobs
// since the array started (tests only).
func (a *Array) Charged() int64 { return a.charged.Load() }

// ChecksumVerifier returns the CopyVerifier an array with checksums
// installs for its scrubs (tests only).
func ChecksumVerifier(a *Array) CopyVerifier { return csumVerifier{a} }

// ChecksumsSummed returns how many data blocks the array's checksum
// wrappers computed a CRC for on writes (tests only).
func (a *Array) ChecksumsSummed() int64 {
	n := int64(0)
	if p := a.csum.devs.Load(); p != nil {
		for _, d := range *p {
			n += d.Stats().Summed
		}
	}
	return n
}
