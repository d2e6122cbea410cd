// Package membertest provides test doubles and a conformance suite for raidd
// members (raid.Member):
//
//   - Fault injection in the style of pebble's errorfs: Inject wraps any
//     member in a Faulty that asks an Injector, before every operation,
//     whether to fail it. Small injectors (OnIndex, Always, Randomly,
//     InRange, OpFilter, Toggle, Any, WithErrno) compose into precise
//     scenarios. Behaviours that are not errors compose the same way:
//     BitFlipOnRead corrupts read data, DropWrites acknowledges writes it
//     never performs, Latency slows operations down. Faulty also counts
//     operations and bytes for write-amplification measurements.
//   - Crash simulation: a Crashable keeps durable and unsynced bytes apart,
//     and Crash keeps the durable bytes plus a seeded random subset of the
//     unsynced sector writes, modelling a power cut with torn writes.
//   - TestMember, a conformance suite that every member implementation must
//     pass, in the manner of testing/fstest.TestFS.
//
// # Invariants
//
//   - An injected failure is an *InjectedError: errors.Is(err, syscall.EIO)
//     holds (or the errno chosen with WithErrno), and errors.Is(err,
//     ErrInjected) tells injected failures from real ones. A failed
//     operation is not passed to the wrapped member at all.
//   - Every injector here is safe for concurrent use. Seeded randomness is
//     reproducible only when calls arrive in a reproducible order.
//   - For a Crashable, bytes covered by a Sync that returned before Crash
//     always survive the crash unless a later unsynced write or discard
//     overlaps them; then each 512-byte sector of that later operation is
//     independently either applied or lost.
package membertest
