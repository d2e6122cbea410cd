package stripe

import "sync"

// lockSlots is the size of the striped lock table. Stripes hash onto slots
// by their index modulo lockSlots; two stripes that share a slot are
// serialized needlessly but never deadlock, because every caller takes the
// slots of a contiguous stripe range in ascending slot order.
const lockSlots = 4096

// Locks is a table of reader/writer locks over stripes. Writers of a
// stripe exclude each other and its readers. It allocates nothing per call
// and has no array-wide lock: work on distinct stripes (modulo the table
// size) proceeds in parallel. The zero value is ready to use.
type Locks struct {
	slots [lockSlots]struct {
		sync.RWMutex
		_ [40]byte // keep hot slots on separate cache lines
	}
}

// slotRange converts a stripe range into at most two ascending slot ranges.
func slotRange(first, last int64) (a0, a1, b0, b1 int) {
	if last-first+1 >= lockSlots {
		return 0, lockSlots - 1, 1, 0
	}
	f, l := int(first%lockSlots), int(last%lockSlots)
	if f <= l {
		return f, l, 1, 0
	}
	// Wrapped: [0, l] then [f, lockSlots-1], ascending overall.
	return 0, l, f, lockSlots - 1
}

// Lock takes the stripes first..last (inclusive) exclusively; 0 <= first <= last.
func (t *Locks) Lock(first, last int64) {
	a0, a1, b0, b1 := slotRange(first, last)
	for i := a0; i <= a1; i++ {
		t.slots[i].Lock()
	}
	for i := b0; i <= b1; i++ {
		t.slots[i].Lock()
	}
}

// Unlock releases what Lock(first, last) took.
func (t *Locks) Unlock(first, last int64) {
	a0, a1, b0, b1 := slotRange(first, last)
	for i := a0; i <= a1; i++ {
		t.slots[i].Unlock()
	}
	for i := b0; i <= b1; i++ {
		t.slots[i].Unlock()
	}
}

// RLock takes the stripes first..last shared.
func (t *Locks) RLock(first, last int64) {
	a0, a1, b0, b1 := slotRange(first, last)
	for i := a0; i <= a1; i++ {
		t.slots[i].RLock()
	}
	for i := b0; i <= b1; i++ {
		t.slots[i].RLock()
	}
}

// RUnlock releases what RLock(first, last) took.
func (t *Locks) RUnlock(first, last int64) {
	a0, a1, b0, b1 := slotRange(first, last)
	for i := a0; i <= a1; i++ {
		t.slots[i].RUnlock()
	}
	for i := b0; i <= b1; i++ {
		t.slots[i].RUnlock()
	}
}
