package superblock

import (
	"errors"
	"fmt"
	"io"
)

// Slot returns the slot an update with the given event count goes to:
// events % 2. Consecutive event counts alternate slots, so a torn write of
// one slot leaves the previous update intact in the other.
func Slot(events uint64) int { return int(events % Slots) }

// SlotOffset returns the byte offset of slot 0 or 1 from the start of the
// member: 4096 and 8192. Bytes [0, 4096) stay zero.
func SlotOffset(slot int) int64 { return int64(slot+1) * SlotSize }

// Read reads both slots from the start of r and returns the valid one with
// the higher Events; on a tie, slot 0. The returned Meta is the caller's.
//
// When neither slot is valid Read returns an error wrapping ErrNoMagic if
// neither slot has the magic (not a raidd member). Otherwise it joins one
// error per slot that has the magic, each wrapping ErrVersion, ErrChecksum
// or ErrCorrupt (a damaged member), so errors.Is(err, ErrNoMagic) is false.
// A slot cut short by the end of r counts as missing when it lacks the magic
// and as ErrCorrupt when it has it. When both slots are valid but name a
// different ArrayUUID or MemberUUID, Read returns ErrSlotMismatch. Any other
// error from r is returned wrapped, without looking at the other slot: an
// unreadable header must not fall back to a possibly older copy.
//
// Read may run concurrently with other reads of r, but not with Write or
// Erase on the same device.
func Read(r io.ReaderAt) (*Meta, error) {
	var (
		metas [Slots]*Meta
		errs  [Slots]error
		buf   [SlotSize]byte
	)
	for s := range Slots {
		off := SlotOffset(s)
		n, err := r.ReadAt(buf[:], off)
		switch {
		case n == SlotSize:
			metas[s], errs[s] = Decode(buf[:])
		case err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
			if _, derr := Decode(buf[:n]); errors.Is(derr, ErrNoMagic) {
				errs[s] = ErrNoMagic
			} else {
				errs[s] = fmt.Errorf("%w: truncated to %d bytes by the end of the device", ErrCorrupt, n)
			}
		default:
			return nil, fmt.Errorf("superblock: read slot %d at offset %d: %w", s, off, err)
		}
		if errs[s] != nil {
			errs[s] = fmt.Errorf("slot %d at offset %d: %w", s, off, errs[s])
		}
	}

	switch {
	case metas[0] != nil && metas[1] != nil:
		a, b := metas[0], metas[1]
		if a.ArrayUUID != b.ArrayUUID || a.MemberUUID != b.MemberUUID {
			return nil, fmt.Errorf("%w: slot 0 has array %s member %s, slot 1 has array %s member %s",
				ErrSlotMismatch, FormatUUID(a.ArrayUUID), FormatUUID(a.MemberUUID),
				FormatUUID(b.ArrayUUID), FormatUUID(b.MemberUUID))
		}
		if b.Events > a.Events {
			return b, nil
		}
		return a, nil
	case metas[0] != nil:
		return metas[0], nil
	case metas[1] != nil:
		return metas[1], nil
	}

	var damaged problemList
	for _, err := range errs {
		if !errors.Is(err, ErrNoMagic) {
			damaged = append(damaged, err)
		}
	}
	if len(damaged) == 0 {
		return nil, ErrNoMagic
	}
	return nil, fmt.Errorf("superblock: no valid slot: %w", damaged)
}

// Write encodes m and writes it to slot Slot(m.Events) of w. The caller bumps
// m.Events before every update so that updates alternate slots. Write does
// not sync: the update is durable only after the caller syncs the device.
// Errors wrap ErrInvalid (m fails Validate; nothing is written) or the error
// from w (io.ErrShortWrite when w reports a short write without one).
func Write(w io.WriterAt, m *Meta) error {
	var buf [SlotSize]byte
	if err := m.Encode(buf[:]); err != nil {
		return err
	}
	s := Slot(m.Events)
	if err := writeFull(w, buf[:], SlotOffset(s)); err != nil {
		return fmt.Errorf("superblock: write slot %d at offset %d: %w", s, SlotOffset(s), err)
	}
	return nil
}

// Erase zeroes both slots so that Read returns ErrNoMagic. It does not touch
// the rest of the header or sync.
func Erase(w io.WriterAt) error {
	var zero [Slots * SlotSize]byte
	if err := writeFull(w, zero[:], SlotOffset(0)); err != nil {
		return fmt.Errorf("superblock: erase slots at offset %d: %w", SlotOffset(0), err)
	}
	return nil
}

func writeFull(w io.WriterAt, p []byte, off int64) error {
	n, err := w.WriteAt(p, off)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	return err
}
