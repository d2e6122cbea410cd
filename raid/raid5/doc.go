// Package raid5 registers the RAID5 personality: N ≥ 3 members, one chunk
// of parity per row, rotating in md's default left-symmetric layout, so the
// array survives the loss of any one member.
//
// Parity is plain XOR, computed by klauspost/reedsolomon with
// WithFastOneParityMatrix (without that option the library's single parity
// is not XOR and not md-compatible) and WithMaxGoroutines(1): raidd gets its
// parallelism from many stripes in flight, and splitting one stripe's shards
// over goroutines was measured slower.
//
// # Writes
//
// A write is split by row. For each row the layout picks, from the member
// states and what the write covers, the plan that needs the fewest member
// reads:
//
//   - full stripe: every data chunk is replaced, parity is computed from the
//     new data, and nothing is read; the parity is computed straight into
//     a parity member held in memory (raid.Op.WriteFill) when the row needs
//     no write-hole record;
//   - reconstruct-write (RCW): read the parts of the untouched data chunks
//     that share the written range, compute parity from scratch;
//   - read-modify-write (RMW): read the old data being replaced and the old
//     parity, and apply the delta (P ^= old ^ new).
//
// In a degraded row the plan is forced: with the parity member gone, data is
// written without parity; with a data member gone that the write does not
// touch, RMW (which never needs it); with a data member gone that the write
// touches, RCW that first reconstructs the missing chunk's old contents from
// parity, so the survivors' parity describes the new data. Reads happen
// before any write of the row, so a member that fails during the reads only
// changes the plan; a member that fails during the writes leaves the row
// consistent in the degraded sense (parity was computed with the new data).
//
// # The write hole
//
// Each row write runs between Op.BeginRow and Op.EndRow. Before it reads,
// Op.PlanRowLog says whether the row needs a record in the write-hole log
// (consistency policy "ppl", the default: a partial parity log) and
// which data bytes the record treats as written (W: the write's own, and
// those of earlier writes to the row not yet durable; when W holds bytes
// the write does not write, the plan is a reconstruct-write, which reads
// them, unless the row's previous record's partial parity is kept in
// memory (RowLog.Cached): then a read-modify-write adds the old bytes of
// its own spans outside that record's W to it). Once the new parity is
// computed and the member writes are queued, and before they run, the
// Layout sets the partial parity P' = P + (the current data of W), the
// XOR of the data the write leaves alone over [Lo, Hi), and Op.LogRow
// appends it to the log area of the row's parity member. A full-stripe row (W covers the range) records
// nothing, unless the row already has a record in the log's epoch (then a
// record with zero partial parity); with the parity member missing there
// is no parity to tear, and nothing is recorded. See raid/journal.go and
// the README.
//
// # Discards
//
// Whole rows are discarded on every member, parity included: XOR of zeroes
// is zero, so the row stays consistent. Partial rows are written as zeroes
// through the normal plans; the array punches the aligned all-zero 4 KiB
// blocks of every member write, parity included, and writes the rest.
package raid5
