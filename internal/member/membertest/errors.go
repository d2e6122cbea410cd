package membertest

import "errors"

// ErrInjected is matched by errors.Is for every *InjectedError, so that tests
// can tell injected failures from real ones. It is never returned on its own.
var ErrInjected = errors.New("membertest: injected fault")
