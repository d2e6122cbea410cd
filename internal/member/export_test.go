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
