// Package raid is raidd's engine: it turns a set of members into one array
// that reads and writes exactly like a single disk, at every level, with and
// without missing members, and keeps it that way through failures, spares,
// rebuilds, replacements and crashes.
//
// # Structure
//
//   - Array is the front door (ReadAt, WriteAt, WriteAtFUA, Sync, Discard,
//     WriteZeroes, Status, Check, Close, and the member lifecycle: FailMember,
//     FailMemberChecked, RemoveMember, Release, AddMember (which re-adds a
//     former member over the write-intent bitmap), ReplaceMember). It satisfies the nbd package's
//     Device interface and its optional capabilities.
//   - Create writes fresh superblocks; Assemble starts an array from its
//     members' superblocks, following mdadm's rules (see Assemble).
//   - Layout is a personality (raid0, raid1/raid10 via internal/mirror,
//     raid5, raid6). Personalities register themselves with Register; import them
//     for their side effect. A Layout describes its level's policy as
//     Traits (which writes and reads lock, coalescing, resync while
//     degraded); the engine asks the Traits and the stripe.Geometry
//     (Tolerance, Survives, Copies, RowSpan) and never compares levels, so
//     adding a level touches only its package and stripe's level table.
//     NewOp builds an Op without an Array, for testing a Layout alone.
//   - The engine is split by concern: array.go (the Array type, its
//     construction and lifecycle: enter/leave, background jobs, Close),
//     io.go (the I/O entry points), commit.go (superblock commits and member
//     failures), dirty.go (the dirty/clean protocol), resync.go, check.go,
//     recovery.go (rebuild and replace), window.go (the windows of rows
//     that scrub, rebuild and replace work in), manage.go (member commands),
//     assemble.go (Create and Assemble), status.go and snapshot.go (Status),
//     memberstats.go (per-device I/O error and repair counters, which
//     Op.Run keeps without a lock through the View), readahead.go (which
//     member reads of a sequential client stream ask a direct member to
//     read its next data chunks ahead).
//   - stripecache.go is the stripe cache of the parity levels
//     (Options.StripeCache, Traits.Coalesce): partial-stripe pieces of
//     writes (those of streams; random ones too when the write-hole log is
//     on members not held in memory, Options.RandomWriteBack, so that the
//     flusher's write-outs share log writes) are copied into one
//     stripe-width buffer per stripe and
//     acknowledged; a stripe goes to the members when it is complete (one
//     full-stripe write, no reads), after Options.StripeCacheDelay, under
//     memory pressure, or before a Sync, a FUA write, a discard or
//     write-zeroes of it, and Close. It replaces coalesce.go's gathering
//     (which only merges writes that wait for the same stripe lock at the
//     same moment) when enabled. Its invariants: an entry changes, is
//     written out and is dropped only under its stripe's lock, and is
//     dropped only after its member writes returned; a read that overlaps
//     cached bytes takes the read locks and copies them over what the
//     members returned; at most StripeCache/width buffers ever exist. A
//     crash loses cached data that no Sync or FUA covered, never what
//     they made durable, and a failed member loses nothing: the data is in
//     memory and is written around it.
//   - journal.go is the write-hole log of RAID5 and RAID6, a partial
//     parity log (consistency policy "ppl"): a parity Layout brackets
//     each row write with Op.BeginRow and Op.EndRow, asks Op.PlanRowLog
//     before it reads whether the row needs a record, and calls Op.LogRow
//     with the row's partial parity before it runs the row's writes; the
//     records go to the parity members' log areas (appended, or on
//     members held in memory into reused slots that EndRow clears), and
//     Assemble replays them by recomputing the parity (journal_v1.go
//     replays the redo log an older raidd wrote).
//   - View is an immutable snapshot of the member set behind an atomic
//     pointer. Op is one request's context: the View it uses, scratch space,
//     and the member I/O it queues, which a per-array worker pool runs in
//     parallel without allocating; what is only a memory copy (writes to
//     members in the page cache, reads of members held in memory, of any
//     size) runs on the request's goroutine instead. Array.WritesInline
//     tells the NBD server when every member of a RAID0, RAID1 or RAID10 is
//     held in memory, so that it can run a WRITE on the goroutine that
//     received it; Array.WritesInlineAt answers per write, and on parity
//     levels with a stripe cache says yes to writes that hold two whole
//     stripes, which the server then writes while their payload arrives
//     (smaller parity writes gain from running side by side);
//     Array.ReadsInline does the same for reads of up to 64 KiB
//     on every level. Array.ReceiveAt (receive.go) is the write-side twin
//     of SpliceReadAt: a WRITE whose every byte has one place on one member
//     held in memory (RAID0) is planned through the Layout, and the NBD
//     server receives its payload straight into those members' mapped
//     pages. On RAID5 and RAID6 the whole stripes of a write are received
//     into their data members, and a RowFiller Layout computes each row's
//     parity there once its data is in (receivestripes.go). Op.WriteFill has a Layout compute a member write's
//     bytes (RAID5's full-stripe parity) straight into a member held in
//     memory (fill.go).
//
// # Invariants
//
//   - No array-wide lock on the I/O path. Writes, degraded reads, resync,
//     rebuild and check steps take the stripe locks (stripe.Locks) of what
//     they touch, in ascending order; reads of a healthy array take none.
//     Mirror writes are locked too, so overlapping writes reach every copy in
//     the same order and mirrors never diverge.
//   - Member-state changes are serialized (commitMu), persisted in the
//     superblocks of every member in use (event counter bumped, synced), and
//     only then published as a new View.
//   - A member that fails during a request is recorded as failed on the
//     survivors before that request is acknowledged; the request is
//     completed from redundancy while the level tolerates the loss.
//   - A read error on a member with redundancy is repaired (the bytes are
//     reconstructed, returned and rewritten); only a failed rewrite fails
//     the member.
//   - Before the first write after a clean state the superblocks say dirty;
//     before a write to a bitmap region its bit is on disk on every member.
//     After a crash only the rows of marked regions are resynchronised.
//     While a role is out of sync no bit is cleared, so the bitmap covers
//     everything a failed member missed since Meta.DegradedEvents (re-add).
//   - Without redundancy (RAID0) a member I/O error fails the request with
//     ErrIO and is not recorded: marking the member failed would make every
//     range unreachable.
//   - With per-block checksums (CreateOptions.Checksums, checksums.go) every
//     member device is wrapped by raid/internal/integrity. A block that
//     fails its checksum is a per-request read error on that member: the
//     level reconstructs and rewrites it like a bad sector, but the member
//     is never failed for it. An unrepaired mismatch fails only the read,
//     with ErrIO, and a checksum-lost event names the block. After a crash
//     the resync reseals the rows of the bitmap's dirty regions (RAID0
//     with checksums keeps a bitmap for this).
//   - Layouts never validate user input, never lock and never change member
//     states; the Array does all three.
//
// # Errors
//
// Sentinels are in errors.go. Range and permission errors wrap the errno the
// NBD protocol wants (EINVAL, ENOSPC, EPERM); ErrFailed wraps EIO and is
// joined with the MemberErrors that caused it. Degraded is a state, not an
// error.
//
// # Concurrency
//
// Every exported method of Array may be called from many goroutines.
// Background work (clean marking, bitmap cleaning, resync, rebuild,
// replace, event hooks) is owned by the Array and stops in Close. Its
// delays (the rebuild rate limiter, the quiet interval before clean
// marking, rebuild checkpoints) wait on a clock (raid/internal/clock) that
// tests replace with a fake one they move themselves.
//
// # Locking
//
// Locks are taken in this order, never the other way round (any may be
// skipped):
//
//	stripe locks (ascending) → bitmap.mu → commitMu → cfgMu → lifeMu, recovery.tmu, eventLog.mu, gatherQueue.mu, stripeCache.mu
//	stripe locks (ascending) → journal.mu → commitMu → ...; journal.mu → journal.logs[m].mu (a leaf: a log's batch leader holds none while it writes and syncs); a row-table shard's mu (journal.shards, one at a time) → journal.cacheMu, a leaf
//
// journal.mu is the write-hole log's (journal.go): a parity row write
// holds it shared from Op.BeginRow to Op.EndRow, under the stripe locks;
// a checkpoint holds it exclusively, taken by a row write before it takes
// the lock shared, never while it holds it; Sync and a FUA write hold it
// exclusively while the members sync (a FUA write under its stripe locks,
// after its rows' EndRow). Nothing takes it while holding commitMu or
// cfgMu.
//
// The stripe locks (stripe.Locks) serialize work on a stripe. bitmap.mu
// serializes write-intent bitmap updates. commitMu serializes changes of the
// member table and their superblock writes; it is held across member I/O,
// so that commits reach the members in order (an older table never
// overwrites a newer one) and a member failure is on disk before the request
// that saw it is acknowledged. cfgMu guards the member table in memory and
// is never held across member I/O (commitLocked releases it while it
// writes): the table is written with both held and read with either, so
// Status, which takes cfgMu only, never waits for a stalled member. lifeMu
// orders starting a background job against Close. The others are leaves.
//
// Close runs in this order: new calls and new background jobs are refused;
// background work is cancelled; the calls in flight finish (Close waits for
// the last one to leave, without polling); the background jobs finish; then
// the stripe cache is written out, every member is synced, the array is marked clean and the members closed.
//
// # Check and scrub
//
// Check compares every row's copies or parity and counts rows verified,
// inconsistent and unverifiable (CheckResult). A row is unverifiable when
// too few of its copies or members can be read to compare: a RAID5 row
// missing a member, a RAID6 row missing two, a mirror chunk with one
// readable copy, any RAID0 row. (A RAID6 row missing one member, like a
// 3-way mirror missing one copy, still has redundancy to compare and is
// verified.) An array degraded beyond its redundancy is therefore never
// reported consistent; Check returns an
// error wrapping ErrUnverifiable for it, and ErrInconsistent for rows that
// disagree.
//
// StartScrub runs the same check as a background job (scrub.go): at the
// rebuild rate limits, skipping rows that are holes on every member,
// checkpointed in the superblocks (Meta.Scrub) and resumed by the next
// assembly, and started by a schedule (Options.ScrubInterval). It works,
// as rebuild and replace do, in windows of rows (window.go): the stripe
// locks of a window are taken once, each member is read for the whole
// window in one request (all members in parallel; the job's two workers
// keep one window's reads in flight while the other is compared), and the
// Layout's per-row Check or Rebuild finds its reads served from those
// buffers (Op.Read); a rebuild's or replace's writes to its targets are
// gathered and written at the end of the window. Under a rate limit the
// windows shrink to 1/64 s of it, so a limited job moves in small steps.
// Each row is checked under its shared stripe locks; with repair, a row found
// inconsistent is checked again as a write step (exclusive locks, the array
// marked dirty) with Op.Repairing set, and the Layout rewrites what is
// wrong. Layouts report each disagreement with Op.Mismatch: the member,
// offset and shard, whether it was located or chosen by rule, and whether
// it was repaired. Mirrors ask Op.TrustedCopy which copy is right: a
// CopyVerifier (SetCopyVerifier; per-block checksums) decides when one is
// installed, otherwise the first readable copy wins, as in md.
package raid
