package membertest

import (
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Op is a member operation that an Injector is asked about.
type Op uint8

// The operations of raid.Member that can be intercepted. Close and Size are
// never intercepted.
const (
	OpRead Op = iota
	OpWrite
	OpSync
	OpDiscard
)

// String returns the operation's lower-case name ("read", "write", ...).
func (o Op) String() string {
	switch o {
	case OpRead:
		return "read"
	case OpWrite:
		return "write"
	case OpSync:
		return "sync"
	case OpDiscard:
		return "discard"
	default:
		return fmt.Sprintf("Op(%d)", uint8(o))
	}
}

// Injector decides, before every operation on a Faulty, whether the
// operation fails. off and n give the operation's byte range; a Sync has off
// 0 and n 0. MaybeError returns nil to let the operation run, an error
// (normally an *InjectedError) to fail it without running it, or one of the
// decisions made by BitFlipOnRead and DropWrites, which Faulty carries out
// instead of failing. Implementations must be safe for concurrent use.
type Injector interface {
	MaybeError(op Op, off, n int64) error
}

// InjectorFunc adapts a function to the Injector interface. The function
// must be safe for concurrent use.
type InjectorFunc func(op Op, off, n int64) error

// MaybeError calls f(op, off, n).
func (f InjectorFunc) MaybeError(op Op, off, n int64) error { return f(op, off, n) }

// InjectedError is the failure produced by the injectors of this package.
// Its Unwrap returns Err (syscall.EIO unless WithErrno chose another errno)
// and it also matches ErrInjected under errors.Is.
type InjectedError struct {
	Op  Op
	Off int64
	N   int64
	Err error
}

// Error describes the injected failure.
func (e *InjectedError) Error() string {
	if e.Op == OpSync {
		return fmt.Sprintf("membertest: injected %s failure: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("membertest: injected %s failure at [%d, +%d): %v", e.Op, e.Off, e.N, e.Err)
}

// Unwrap returns the underlying errno.
func (e *InjectedError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInjected.
func (e *InjectedError) Is(target error) bool { return target == ErrInjected }

// injected returns the standard injected failure for an operation.
func injected(op Op, off, n int64) error {
	return &InjectedError{Op: op, Off: off, N: n, Err: syscall.EIO}
}

// Never returns an injector that never fails anything.
func Never() Injector {
	return InjectorFunc(func(Op, int64, int64) error { return nil })
}

// Always returns an injector that fails every operation it is asked about.
// Narrow it with OpFilter, InRange or Toggle.
func Always() Injector {
	return InjectorFunc(injected)
}

// OnIndex returns an injector that fails only the call with index i
// (counting from 0) among the calls that reach it, and succeeds on every
// other call. Wrapped in OpFilter or InRange it counts only matching calls:
// OpFilter(OnIndex(2), OpWrite) fails the third write.
func OnIndex(i int) Injector {
	var calls atomic.Int64
	return InjectorFunc(func(op Op, off, n int64) error {
		if calls.Add(1)-1 == int64(i) {
			return injected(op, off, n)
		}
		return nil
	})
}

// Randomly returns an injector that fails each call with probability p,
// drawing from a source seeded with seed. It is safe for concurrent use; the
// sequence of decisions is reproducible when calls arrive in the same order.
func Randomly(p float64, seed int64) Injector {
	var mu sync.Mutex
	rng := rand.New(rand.NewSource(seed))
	return InjectorFunc(func(op Op, off, n int64) error {
		mu.Lock()
		hit := rng.Float64() < p
		mu.Unlock()
		if hit {
			return injected(op, off, n)
		}
		return nil
	})
}

// InRange returns an injector that consults inj only for operations whose
// byte range overlaps [off, off+n), and lets every other operation run. Sync
// has no range and never matches.
func InRange(off, n int64, inj Injector) Injector {
	return InjectorFunc(func(op Op, o, l int64) error {
		if l <= 0 || o >= off+n || o+l <= off {
			return nil
		}
		return inj.MaybeError(op, o, l)
	})
}

// OpFilter returns an injector that consults inj only for the listed
// operations and lets every other operation run.
func OpFilter(inj Injector, ops ...Op) Injector {
	ops = slices.Clone(ops)
	return InjectorFunc(func(op Op, off, n int64) error {
		if !slices.Contains(ops, op) {
			return nil
		}
		return inj.MaybeError(op, off, n)
	})
}

// Any returns an injector that consults each of injs in order and returns the
// first non-nil decision. Injectors after it are not consulted, so Any with a
// Latency first delays every operation and then lets the rest decide.
func Any(injs ...Injector) Injector {
	injs = slices.Clone(injs)
	return InjectorFunc(func(op Op, off, n int64) error {
		for _, inj := range injs {
			if err := inj.MaybeError(op, off, n); err != nil {
				return err
			}
		}
		return nil
	})
}

// WithErrno returns an injector that makes the *InjectedError failures of inj
// wrap errno instead of syscall.EIO (for example syscall.ENOSPC). Other
// decisions pass through unchanged.
func WithErrno(errno syscall.Errno, inj Injector) Injector {
	return InjectorFunc(func(op Op, off, n int64) error {
		err := inj.MaybeError(op, off, n)
		if ie, ok := err.(*InjectedError); ok {
			return &InjectedError{Op: ie.Op, Off: ie.Off, N: ie.N, Err: errno}
		}
		return err
	})
}

// Toggle switches an injector on and off at run time; while off it lets
// every operation run. A new Toggle starts off. Safe for concurrent use.
type Toggle struct {
	inj Injector
	on  atomic.Bool
}

// NewToggle returns a Toggle around inj, initially off.
func NewToggle(inj Injector) *Toggle { return &Toggle{inj: inj} }

// On makes the Toggle consult its injector.
func (t *Toggle) On() { t.on.Store(true) }

// Off makes the Toggle let every operation run.
func (t *Toggle) Off() { t.on.Store(false) }

// IsOn reports whether the Toggle is on.
func (t *Toggle) IsOn() bool { return t.on.Load() }

// MaybeError consults the wrapped injector while the Toggle is on.
func (t *Toggle) MaybeError(op Op, off, n int64) error {
	if !t.on.Load() {
		return nil
	}
	return t.inj.MaybeError(op, off, n)
}

// Latency returns an injector that sleeps for d on every call and never
// fails. Combine it with Any to delay and fail, or with OpFilter to delay
// only some operations.
func Latency(d time.Duration) Injector {
	return InjectorFunc(func(Op, int64, int64) error {
		time.Sleep(d)
		return nil
	})
}

// dropDecision tells Faulty to report success without performing a write.
type dropDecision struct{}

func (dropDecision) Error() string { return "membertest: write dropped" }

// flipDecision tells Faulty to perform a read and flip one bit of the data.
type flipDecision struct{ bit uint64 }

func (flipDecision) Error() string { return "membertest: read bit flipped" }

// DropWrites returns an injector that, for every write for which inj returns
// a non-nil decision, makes Faulty report complete success without writing
// anything (a device that silently loses writes). Other operations run
// normally and inj is not consulted for them.
func DropWrites(inj Injector) Injector {
	return InjectorFunc(func(op Op, off, n int64) error {
		if op != OpWrite || inj.MaybeError(op, off, n) == nil {
			return nil
		}
		return dropDecision{}
	})
}

// BitFlipOnRead returns an injector that, with probability p per read, lets
// the read run and then flips one randomly chosen bit among the bytes read
// (silent corruption). Other operations run normally. The random source is
// seeded with seed and safe for concurrent use.
func BitFlipOnRead(p float64, seed int64) Injector {
	var mu sync.Mutex
	rng := rand.New(rand.NewSource(seed))
	return InjectorFunc(func(op Op, off, n int64) error {
		if op != OpRead || n <= 0 {
			return nil
		}
		mu.Lock()
		hit := rng.Float64() < p
		bit := rng.Uint64()
		mu.Unlock()
		if !hit {
			return nil
		}
		return flipDecision{bit: bit}
	})
}
