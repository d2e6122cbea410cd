package member

// SetVectorHook installs fn as the hook a vectored call runs between its
// checks and the system call, and returns a function that removes it.
func SetVectorHook(fn func()) (restore func()) {
	testHookVector = fn
	return func() { testHookVector = nil }
}

// Descriptor returns the member's descriptor number.
func Descriptor(m *File) int {
	fd := -1
	_ = m.control(func(d int) error { fd = d; return nil })
	return fd
}

// StatSize runs the size check's fstat.
func StatSize(m *File) (int64, error) { return m.statSize() }

// SetIOHook installs fn as the hook every read or write system call on a
// member's data runs first (see testHookIO), and returns a function that
// removes it. fn must be safe for concurrent use.
func SetIOHook(fn func(m *File, write bool, off int64, n int)) (restore func()) {
	testHookIO = fn
	return func() { testHookIO = nil }
}

// Alignment returns what the member requires of O_DIRECT buffers.
func Alignment(m *File) int64 { return m.align }

// MaxBounce is the largest span one bounce buffer serves.
const MaxBounce = maxBounce

// SetStatHook installs fn as the hook every fstat of the size check runs
// first, and returns a function that removes it.
func SetStatHook(fn func()) (restore func()) {
	testHookStat = fn
	return func() { testHookStat = nil }
}

// TailMapped reports whether the member's last page is mapped for the size
// check after a write.
func TailMapped(m *File) bool { return m.hasTail() }

// DSyncRefused reports whether WritevAtDSync found RWF_DSYNC refused and
// writes and syncs instead.
func DSyncRefused(m *File) bool { return m.noDSync.Load() }

// RefuseDSync makes WritevAtDSync write and sync, as on a kernel that
// refuses RWF_DSYNC.
func RefuseDSync(m *File) { m.noDSync.Store(true) }

// SetSyncHook installs fn as the hook every Sync runs before its
// fdatasync, and returns a function that removes it.
func SetSyncHook(fn func(m *File)) (restore func()) {
	testHookSync = fn
	return func() { testHookSync = nil }
}

// SetMappedHook installs fn as the hook every copy through a member's
// mapping runs first (see mapped.go), and returns a function that removes
// it. fn must be safe for concurrent use.
func SetMappedHook(fn func(m *File, write bool)) (restore func()) {
	testHookMapped = fn
	return func() { testHookMapped = nil }
}

// Mapped reports whether the member's file is mapped for its reads and
// writes.
func Mapped(m *File) bool {
	m.mapped.mu.RLock()
	defer m.mapped.mu.RUnlock()
	return m.mapped.mem != nil
}

// SetFaultHook installs fn as the hook every vectored call asks whether it
// fails (see testHookFault), and returns a function that removes it.
func SetFaultHook(fn func(m *File, write bool, off int64, n int) error) (restore func()) {
	testHookFault = fn
	return func() { testHookFault = nil }
}

// ReadDepth is how many near reads a direct member keeps in flight before
// it queues the next ones.
func ReadDepth(m *File) int { return m.rq.depth }

// SetReadDepth sets it (before the member's first read), so that a test's
// reads queue the same way on a disk and on a solid-state device.
func SetReadDepth(m *File, depth int) { m.rq.depth = depth }

// ReadDepthOf returns the read queue depth of a member on the block device
// dev, with sysfs at root.
func ReadDepthOf(root string, dev uint64) int {
	defer func(old string) { sysfsRoot = old }(sysfsRoot)
	sysfsRoot = root
	return readDepthOf(dev)
}

// ReadDepthRotational and ReadDepthSolid are the read queue depths of a
// member on a disk that rotates and on one that does not.
const (
	ReadDepthRotational = readDepth
	ReadDepthSolid      = readDepthSolid
)

// QueuedReads returns how many reads wait in the member's read queue.
func QueuedReads(m *File) int {
	m.rq.mu.Lock()
	defer m.rq.mu.Unlock()
	return len(m.rq.waiting)
}

// ReadAheadLive returns how many read-ahead entries the member holds.
func ReadAheadLive(m *File) int { return int(m.ra.live.Load()) }

// ReadAheadWasteLimit is how many read-aheads in a row may go unread
// before the member ignores ReadAheadBackoff hints.
const (
	ReadAheadWasteLimit = raWasteLimit
	ReadAheadBackoff    = raBackoff
)

// SetReadAheadBackoff turns the read-ahead's back-off off (false) or on,
// for a test whose writes void read-aheads on purpose.
func SetReadAheadBackoff(m *File, on bool) {
	m.ra.mu.Lock()
	m.ra.noBackoff = !on
	m.ra.mu.Unlock()
}
