package superblock

import (
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSlotOffsets(t *testing.T) {
	assert.Equal(t, int64(4096), SlotOffset(0))
	assert.Equal(t, int64(8192), SlotOffset(1))
	assert.Equal(t, 0, Slot(0))
	assert.Equal(t, 1, Slot(1))
	assert.Equal(t, 0, Slot(1<<40))
	assert.Equal(t, 1, Slot(^uint64(0)))
	assert.Equal(t, 983040, BitmapBytes)
	assert.LessOrEqual(t, SlotOffset(1)+SlotSize, int64(BitmapOffset), "slots overlap the bitmap area")
}

// metaAt returns validMeta with the given event count.
func metaAt(events uint64) *Meta {
	m := validMeta()
	m.Events = events
	return m
}

func TestWriteAlternatesSlots(t *testing.T) {
	d := newMemDev(HeaderSize)
	for ev := uint64(10); ev < 16; ev++ {
		m := metaAt(ev)
		require.NoError(t, Write(d, m))

		slot, err := Decode(d.slot(Slot(ev)))
		require.NoError(t, err)
		assert.Equal(t, ev, slot.Events, "update %d in slot %d", ev, Slot(ev))
		if ev > 10 {
			prev, err := Decode(d.slot(Slot(ev - 1)))
			require.NoError(t, err, "update %d damaged the previous slot", ev)
			assert.Equal(t, ev-1, prev.Events)
		}
		got, err := Read(d)
		require.NoError(t, err)
		assert.Equal(t, m, got)
	}
	assert.Equal(t, make([]byte, 4096), d.b[:4096], "bytes 0..4095 must stay zero")
	assert.Equal(t, make([]byte, HeaderSize-3*4096), d.b[3*4096:], "Write touched bytes past the slots")
}

// TestReadSlotChoice table-tests which slot Read returns for every
// combination of slot contents.
func TestReadSlotChoice(t *testing.T) {
	type content func(t *testing.T, slot []byte)
	meta := func(events uint64) content {
		return func(t *testing.T, slot []byte) { copy(slot, encode(t, metaAt(events))) }
	}
	other := func(events uint64) content { // valid, but another array
		return func(t *testing.T, slot []byte) {
			m := metaAt(events)
			m.ArrayUUID = uuidN(0xB0)
			copy(slot, encode(t, m))
		}
	}
	empty := func(t *testing.T, slot []byte) {}
	garbage := func(t *testing.T, slot []byte) {
		for i := range slot {
			slot[i] = byte(i*7 + 3)
		}
	}
	flipped := func(events uint64) content { // media corruption: one bit
		return func(t *testing.T, slot []byte) {
			copy(slot, encode(t, metaAt(events)))
			slot[150] ^= 0x04
		}
	}
	newerVersion := func(t *testing.T, slot []byte) {
		copy(slot, encode(t, metaAt(99)))
		slot[8] = 2
		resum(slot)
	}
	invalid := func(t *testing.T, slot []byte) { // checksum fine, fields not
		copy(slot, encode(t, metaAt(99)))
		slot[96] = 3 // Level 3
		resum(slot)
	}

	tests := []struct {
		name       string
		s0, s1     content
		wantEvents uint64  // when want is nil
		want       []error // errors.Is targets, when an error is expected
		notWant    []error
	}{
		{"only-slot0", meta(4), empty, 4, nil, nil},
		{"only-slot1", empty, meta(5), 5, nil, nil},
		{"slot1-newer", meta(4), meta(5), 5, nil, nil},
		{"slot0-newer", meta(6), meta(5), 6, nil, nil},
		{"tie-prefers-slot0", meta(6), func(t *testing.T, s []byte) {
			m := metaAt(6)
			m.Name = "slot1"
			copy(s, encode(t, m))
		}, 6, nil, nil},
		{"newer-corrupt-falls-back", flipped(6), meta(5), 5, nil, nil},
		{"newer-garbage-falls-back", meta(4), garbage, 4, nil, nil},
		{"newer-version-falls-back", newerVersion, meta(5), 5, nil, nil},
		{"newer-invalid-falls-back", meta(4), invalid, 4, nil, nil},
		{"no-magic", empty, empty, 0, []error{ErrNoMagic}, []error{ErrChecksum, ErrCorrupt}},
		{"both-checksum", flipped(6), flipped(5), 0, []error{ErrChecksum}, []error{ErrNoMagic}},
		{"checksum-and-empty", flipped(6), empty, 0, []error{ErrChecksum}, []error{ErrNoMagic}},
		{"empty-and-invalid", empty, invalid, 0, []error{ErrCorrupt}, []error{ErrNoMagic, ErrChecksum}},
		{"checksum-and-invalid", flipped(4), invalid, 0, []error{ErrChecksum, ErrCorrupt}, []error{ErrNoMagic}},
		{"version-only", newerVersion, empty, 0, []error{ErrVersion}, []error{ErrNoMagic}},
		{"garbage-both", garbage, garbage, 0, []error{ErrNoMagic}, nil},
		{"different-arrays", meta(4), other(5), 0, []error{ErrSlotMismatch}, []error{ErrNoMagic}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newMemDev(HeaderSize)
			tt.s0(t, d.slot(0))
			tt.s1(t, d.slot(1))
			got, err := Read(d)
			if tt.want == nil {
				require.NoError(t, err)
				require.NotNil(t, got)
				assert.Equal(t, tt.wantEvents, got.Events)
				assert.Equal(t, metaAt(tt.wantEvents), got)
				return
			}
			assert.Nil(t, got)
			for _, w := range tt.want {
				assert.ErrorIs(t, err, w)
			}
			for _, nw := range tt.notWant {
				assert.NotErrorIs(t, err, nw)
			}
		})
	}
}

// TestTornWrite simulates a crash in the middle of an update: the new slot
// is written only up to a tear point over the slot it replaces. Whatever the
// tear point, Read must return the previous update; only a complete write
// returns the new one.
func TestTornWrite(t *testing.T) {
	tears := []int{0, 1, 8, 12, 16, 160, 511, 512, 1024, 1792, 2048, 3584, 4091, 4092, 4095}
	for _, tear := range tears {
		t.Run(fmt.Sprintf("tear=%d", tear), func(t *testing.T) {
			d := newMemDev(HeaderSize)
			require.NoError(t, Write(d, metaAt(4))) // slot 0
			require.NoError(t, Write(d, metaAt(5))) // slot 1
			next := metaAt(6)
			next.State = StateDirty
			next.UpdateTime++
			nb := encode(t, next)
			copy(d.slot(Slot(6))[:tear], nb[:tear])

			got, err := Read(d)
			require.NoError(t, err)
			assert.Equal(t, metaAt(5), got)
		})
	}
	t.Run("tear=4096", func(t *testing.T) {
		d := newMemDev(HeaderSize)
		require.NoError(t, Write(d, metaAt(4)))
		require.NoError(t, Write(d, metaAt(5)))
		copy(d.slot(0), encode(t, metaAt(6)))
		got, err := Read(d)
		require.NoError(t, err)
		assert.Equal(t, uint64(6), got.Events)
	})
	t.Run("first-write-torn", func(t *testing.T) {
		// A torn first write leaves no valid slot but the magic: a damaged
		// member, not "not a member".
		d := newMemDev(HeaderSize)
		copy(d.slot(0)[:2048], encode(t, metaAt(0))[:2048])
		_, err := Read(d)
		require.ErrorIs(t, err, ErrChecksum)
		assert.NotErrorIs(t, err, ErrNoMagic)
	})
}

func TestErase(t *testing.T) {
	d := newMemDev(HeaderSize)
	for i := range d.b {
		d.b[i] = 0x5A
	}
	require.NoError(t, Write(d, metaAt(4)))
	require.NoError(t, Write(d, metaAt(5)))
	require.NoError(t, Erase(d))
	_, err := Read(d)
	require.ErrorIs(t, err, ErrNoMagic)
	assert.Equal(t, make([]byte, 2*SlotSize), d.b[4096:12288])
	for _, c := range [][]byte{d.b[:4096], d.b[12288:]} {
		for _, x := range c {
			require.Equal(t, byte(0x5A), x, "Erase touched bytes outside the slots")
		}
	}
	// After Erase a new array can be written with any event count.
	require.NoError(t, Write(d, metaAt(0)))
	got, err := Read(d)
	require.NoError(t, err)
	assert.Equal(t, metaAt(0), got)
}

func TestReadShortDevice(t *testing.T) {
	full := newMemDev(HeaderSize)
	require.NoError(t, Write(full, metaAt(4)))
	require.NoError(t, Write(full, metaAt(5)))

	tests := []struct {
		name   string
		size   int
		events uint64
		want   error
	}{
		{"empty", 0, 0, ErrNoMagic},
		{"before-slots", 4096, 0, ErrNoMagic},
		{"slot0-cut", 4096 + 100, 0, ErrCorrupt},
		{"slot1-absent", 8192, 4, nil},
		{"slot1-magic-only", 8192 + 8, 4, nil},
		{"both-slots", 12288, 5, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &memDev{b: full.b[:tt.size:tt.size]}
			got, err := Read(d)
			if tt.want != nil {
				require.ErrorIs(t, err, tt.want)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.events, got.Events)
		})
	}
	t.Run("slot0-cut-slot1-absent-is-damaged", func(t *testing.T) {
		_, err := Read(&memDev{b: full.b[:4096+SlotSize/2]})
		require.ErrorIs(t, err, ErrCorrupt)
		assert.NotErrorIs(t, err, ErrNoMagic)
	})
}

// faultyDev fails every ReadAt or WriteAt at the given offset.
type faultyDev struct {
	*memDev
	failOff int64
	short   bool // report a short write without an error
}

var errMedia = errors.New("faulty: medium error")

func (f *faultyDev) ReadAt(p []byte, off int64) (int, error) {
	if off == f.failOff {
		return 0, errMedia
	}
	return f.memDev.ReadAt(p, off)
}

func (f *faultyDev) WriteAt(p []byte, off int64) (int, error) {
	if off == f.failOff {
		if f.short {
			return len(p) / 2, nil
		}
		return 0, errMedia
	}
	return f.memDev.WriteAt(p, off)
}

func TestIOErrors(t *testing.T) {
	d := newMemDev(HeaderSize)
	require.NoError(t, Write(d, metaAt(4)))
	require.NoError(t, Write(d, metaAt(5)))

	t.Run("read-error-slot1-not-hidden", func(t *testing.T) {
		// Slot 0 is valid but older; an unreadable slot 1 must surface.
		_, err := Read(&faultyDev{memDev: d, failOff: SlotOffset(1)})
		require.ErrorIs(t, err, errMedia)
		assert.Contains(t, err.Error(), "slot 1")
		for _, s := range []error{ErrNoMagic, ErrChecksum, ErrCorrupt} {
			assert.NotErrorIs(t, err, s)
		}
	})
	t.Run("write-error", func(t *testing.T) {
		err := Write(&faultyDev{memDev: newMemDev(HeaderSize), failOff: SlotOffset(1)}, metaAt(5))
		require.ErrorIs(t, err, errMedia)
		assert.Contains(t, err.Error(), "slot 1")
	})
	t.Run("short-write", func(t *testing.T) {
		err := Write(&faultyDev{memDev: newMemDev(HeaderSize), failOff: SlotOffset(0), short: true}, metaAt(4))
		require.ErrorIs(t, err, io.ErrShortWrite)
	})
	t.Run("erase-error", func(t *testing.T) {
		err := Erase(&faultyDev{memDev: newMemDev(HeaderSize), failOff: SlotOffset(0)})
		require.ErrorIs(t, err, errMedia)
	})
	t.Run("device-too-small-for-write", func(t *testing.T) {
		err := Write(newMemDev(6000), metaAt(4))
		require.ErrorIs(t, err, errShortDev)
	})
}
