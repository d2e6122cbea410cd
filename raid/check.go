package raid

import "errors"

// Check verifies every row: mirrors identical, parity matching data. It
// returns nil or an error wrapping ErrInconsistent listing the first bad rows.
func (a *Array) Check() error {
	if err := a.enter(); err != nil {
		return err
	}
	defer a.leave()
	var errs []error
	for row := int64(0); row < a.geo.Rows(); row++ {
		if a.closed.Load() {
			return errors.Join(append(errs, ErrClosed)...)
		}
		first, last := a.geo.RowStripes(row)
		a.locks.RLock(first, last)
		op := a.getOp()
		op.locked = true
		err := a.layout.Check(op, row)
		if op.settle() {
			a.handleFailures(op)
		}
		a.putOp(op)
		a.locks.RUnlock(first, last)
		if err != nil {
			errs = append(errs, err)
			if len(errs) >= 8 {
				break
			}
		}
	}
	return errors.Join(errs...)
}
