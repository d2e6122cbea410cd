package raid

// FailRole marks role m failed as if an I/O error had hit it (tests only).
func (a *Array) FailRole(m int, err error) {
	a.cfgMu.Lock()
	defer a.cfgMu.Unlock()
	errs := make([]error, a.geo.Members())
	errs[m] = err
	a.markFailed(a.view.Load(), 1<<uint(m), errs)
}
