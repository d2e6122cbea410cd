package raid

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// EventKind names a state transition of an array.
type EventKind string

// The events an array reports, in its log, in Status().Events and through
// Options.OnEvent (mdadm --monitor's vocabulary where one exists).
const (
	EventMemberFailed    EventKind = "member-failed"
	EventMemberStale     EventKind = "member-stale"
	EventMemberAdded     EventKind = "member-added"
	EventMemberRemoved   EventKind = "member-removed"
	EventSpareClaimed    EventKind = "spare-claimed"
	EventRebuildStarted  EventKind = "rebuild-started"
	EventRebuildProgress EventKind = "rebuild-progress"
	EventRebuildFinished EventKind = "rebuild-finished"
	EventRebuildStopped  EventKind = "rebuild-stopped"
	EventReplaceStarted  EventKind = "replace-started"
	EventReplaceFinished EventKind = "replace-finished"
	EventReplaceFailed   EventKind = "replace-failed"
	EventResyncStarted   EventKind = "resync-started"
	EventResyncFinished  EventKind = "resync-finished"
	EventReadRepaired    EventKind = "read-error-repaired"
	EventScrubStarted    EventKind = "scrub-started"
	EventScrubFinished   EventKind = "scrub-finished" // with the mismatch count
	EventScrubStopped    EventKind = "scrub-stopped"  // interrupted; it resumes at the next assembly
	EventScrubRepaired   EventKind = "scrub-repaired" // one mismatch rewritten
	// EventChecksumRepaired: blocks of a member failed their checksum and
	// were rewritten from redundancy (Role and Detail name member and offset).
	EventChecksumRepaired EventKind = "checksum-repaired"
	// EventChecksumLost: blocks failed their checksum and no copy or
	// parity could rebuild them; the read failed with EIO.
	EventChecksumLost EventKind = "checksum-lost"
	// EventRebuildLostBlocks: a rebuild (or replace) met blocks that no
	// source could provide, because the last copy or a block their parity
	// row needs failed its checksum. It wrote them to the new member with
	// a checksum marked bad, so they read as lost (EIO) there too, and
	// went on. Role and Detail name the member and offsets.
	EventRebuildLostBlocks EventKind = "rebuild-lost-blocks"
	// EventChecksumPageRebuilt: a page of a member's checksum area failed
	// its own CRC; its entries are checked against the data, never trusted.
	EventChecksumPageRebuilt EventKind = "checksum-page-rebuilt"
	EventDegraded            EventKind = "array-degraded"
	EventFailed              EventKind = "array-failed"
)

// Event is one state transition.
type Event struct {
	Time   time.Time `json:"time"`
	Kind   EventKind `json:"kind"`
	Array  string    `json:"array"`
	Role   int       `json:"role"` // -1 when no member is concerned
	Path   string    `json:"path,omitempty"`
	Detail string    `json:"detail,omitempty"`
}

const eventHistory = 32

// eventLog keeps recent events and feeds Options.OnEvent from its own
// goroutine, so a slow hook never blocks I/O.
type eventLog struct {
	mu     sync.Mutex
	recent []Event
	ch     chan Event
	done   chan struct{}
	hook   func(Event)
}

func (a *Array) startEvents(hook func(Event)) {
	a.ev.hook = hook
	a.ev.done = make(chan struct{})
	if hook == nil {
		close(a.ev.done)
		return
	}
	// The goroutine ranges over its own copy: stopEvents sets a.ev.ch to
	// nil under ev.mu, which the goroutine does not hold.
	ch := make(chan Event, 256)
	a.ev.ch = ch
	go func() {
		defer close(a.ev.done)
		for e := range ch {
			hook(e)
		}
	}()
}

func (a *Array) stopEvents() {
	a.ev.mu.Lock()
	ch := a.ev.ch
	a.ev.ch = nil
	a.ev.mu.Unlock()
	if ch != nil {
		close(ch)
	}
	<-a.ev.done
}

// event records e, logs it and queues it for the hook.
func (a *Array) event(e Event) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	e.Array = a.meta.Name
	level := slog.LevelInfo
	switch e.Kind {
	case EventMemberFailed, EventDegraded, EventReplaceFailed, EventRebuildStopped, EventMemberStale, EventReadRepaired, EventScrubRepaired,
		EventChecksumRepaired, EventChecksumPageRebuilt:
		level = slog.LevelWarn
	case EventFailed, EventChecksumLost:
		level = slog.LevelError
	}
	a.log.Log(context.Background(), level, string(e.Kind), "role", e.Role, "path", e.Path, "detail", e.Detail)
	a.ev.mu.Lock()
	defer a.ev.mu.Unlock()
	if len(a.ev.recent) == eventHistory {
		copy(a.ev.recent, a.ev.recent[1:])
		a.ev.recent = a.ev.recent[:eventHistory-1]
	}
	a.ev.recent = append(a.ev.recent, e)
	if a.ev.ch != nil {
		select {
		case a.ev.ch <- e:
		default:
			a.log.Warn("event hook is behind; event dropped", "kind", e.Kind)
		}
	}
}

func (a *Array) recentEvents() []Event {
	a.ev.mu.Lock()
	defer a.ev.mu.Unlock()
	return append([]Event(nil), a.ev.recent...)
}
