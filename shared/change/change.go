// Package change is the one protocol by which a slave changes: read what
// the decision needs, decide with the machine package, write conditioned on
// exactly what was read, and read and decide again after losing a race to a
// concurrent change, with one backoff policy. It also owns what goes with a
// change whatever the store: Idempotency receipts, the decommissioning set's
// join and leave with the time order it imposes (machine.AfterLimitChange),
// and the retention of superseded history entries. Deletions go through it
// too, and so do dry runs (DryRun: the read and the decision, no write).
// So does the change feed (feed.go): every change's entry is written with
// it, and the protocol answers cursors and the list's cursor.
//
// Stores are its drivers, the way database/sql drives a driver.Conn: they
// implement only the primitives of Store (a consistent read, conditioned
// writes that fail with ErrRace) and embed a *Protocol for the rest.
// shared/dynamo and shared/memstore are the two; shared/storetest holds
// both to one contract (docs/decisions.md "One change protocol").
package change

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"

	"golang.org/x/sync/errgroup"
)

// ErrRace is what a Store returns when what a change was decided from
// changed before it was written, or a consistent read collided with a
// write in flight: the change is read and decided again.
var ErrRace = errors.New("lost a race with a concurrent change")

// Store is what a store implements for the protocol.
type Store interface {
	// Read reads together, consistently, the slave id, its expiring record,
	// the decommissioning set and, when key is not nil and names a request
	// (Key set), the receipt stored under it, live or not. An id that
	// cannot name a stored slave reads as no slave. ErrRace when the read
	// collided with a write.
	Read(ctx context.Context, id string, key *Receipt) (Read, error)
	// Write writes w whole or not at all, conditioned on w.Read: ErrRace
	// when any of it changed, machine.LimitError when w joins the
	// decommissioning set and it already holds w.Plan.Limit (> 0) slaves.
	Write(ctx context.Context, w Write) error
	// Create writes ws together, whole or not at all: changes that create
	// a slave and its first history entry and nothing else, each decided
	// on a Read that found no slave, with their feed entries at positions
	// after the heads it reads (whatever their Change.Seq says). ErrRace
	// when any of the slaves exists or a head moved meanwhile.
	Create(ctx context.Context, ws []Write) error
	// Remember stores a receipt unless a live one holds its key.
	Remember(ctx context.Context, r Receipt) error
	// Remove deletes the slave id, its whole history and its expiring
	// record, conditioned on its version being still version, and with
	// leave takes it out of the decommissioning set, and writes gone, the
	// deletion's feed entry. ErrRace when the version or the shard's head
	// changed.
	Remove(ctx context.Context, id string, version int64, leave bool, gone Change) error
	// ListByState calls each with the slaves in state, one at a time.
	ListByState(ctx context.Context, state machine.State, each func(machine.Slave) error) error
	// History returns the newest limit entries of the slave's history at
	// now, newest first, leaving out the entries past their retention.
	History(ctx context.Context, id string, now time.Time, limit int) ([]machine.Update, error)
	// Feed is the change feed's primitives (feed.go); Write, Create and
	// Remove write each change's entry with the change.
	Feed
}

// Read is what a change is decided and conditioned on.
type Read struct {
	Snapshot machine.Snapshot // with the decommissioning set's LimitAt
	Version  int64            // the slave's version (its state changes so far), 0 when there is none
	Receipt  *Receipt         // the receipt under the request's key, live or not
	Head     int64            // the newest position of the slave's feed shard (ShardOf)
}

// Receipt is the first answer to a change request, stored so that a retry
// of it gets that answer instead of being decided again.
type Receipt struct {
	machine.Idempotency
	// Outcome is nil for a change made, else the refusal a retry gets
	// again, as a *fault.Error.
	Outcome error
}

// Live reports whether the receipt still answers a request made at now
// (epoch ms): for machine.IdempotencyWindow.
func (r Receipt) Live(now int64) bool { return now-r.At < machine.IdempotencyWindow.Milliseconds() }

// Replaces is the time at or before which a stored receipt is no longer
// live for a request made at now, and may be replaced.
func Replaces(now int64) int64 { return now - machine.IdempotencyWindow.Milliseconds() }

// Write is a decided change, as a Store writes it: the plan's kind of write
// (machine.Kind) and the parts it names, with what the protocol adds, which
// is configuration and bookkeeping, never a decision.
type Write struct {
	ID   string
	Read Read          // what the plan was decided from
	Plan *machine.Plan // the decision, with all its effects
	// Supersedes is when (epoch s) the entry a Transitions plan follows
	// expires, by the configured history retention, or every entry of an
	// Imports plan but its last; 0 keeps them.
	Supersedes int64
	// Receipt is stored with a state change, for a request that may be
	// retried; nil for one that may not.
	Receipt *Receipt
	// Changes are the change's feed entries, written with it at the
	// positions after Read.Head (their Seq), conditioned on the head read:
	// the slave's change, then its expiring record's. The slave's sequence
	// becomes the last one's.
	Changes []Change
}

// Sequence is the slave's sequence after w: its last feed entry's position,
// 0 when it writes none.
func (w Write) Sequence() int64 {
	if len(w.Changes) == 0 {
		return 0
	}
	return w.Changes[len(w.Changes)-1].Seq
}

// Attempts bounds how often a change is read and decided again after
// losing a race. With the pauses between them (Wait), a change keeps trying
// for about two seconds before it answers 503.
const Attempts = 12

// Wait pauses before another attempt, longer each time: half of the step
// fixed, half at random ("equal jitter"), so that requests that lost the
// same race do not all come back together and lose it again (a jitter of a
// few milliseconds read off the clock kept dozens of changes of one slave,
// or of the decommissioning set, colliding until they ran out of
// attempts). It returns ctx's error, as fault.Timeout past its deadline,
// when ctx ends first.
func Wait(ctx context.Context, attempt int) error {
	step := time.Duration(5<<min(attempt, 6)) * time.Millisecond // 5 ms to 320 ms
	d := step/2 + rand.N(step/2+1)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("wait to retry: %w: %w", fault.Timeout("Timed out waiting to retry a change"), ctx.Err())
		}
		return fmt.Errorf("wait to retry: %w", ctx.Err())
	case <-t.C:
		return nil
	}
}

// retry calls try up to Attempts times while it loses races, waiting
// between attempts and never after the last.
func retry(ctx context.Context, id string, try func() error) error {
	for attempt := range Attempts {
		if attempt > 0 {
			if err := Wait(ctx, attempt-1); err != nil {
				return err
			}
		}
		if err := try(); !errors.Is(err, ErrRace) {
			return err
		}
	}
	return fault.Unavailable("too many concurrent changes of slave %s, try again", id)
}

// Protocol applies changes through a Store. Build it with New.
type Protocol struct {
	store     Store
	retention time.Duration
	now       func() time.Time

	keyMu sync.Mutex
	key   []byte // the feed's cursor key, once read
}

// New returns the protocol over store. History entries expire
// historyRetention after they were superseded; 0 keeps them.
func New(store Store, historyRetention time.Duration) *Protocol {
	return &Protocol{store: store, retention: historyRetention, now: time.Now}
}

// SetClock makes now the clock of the feed (the times of deletions and of
// cursors): time.Now unless a test sets another.
func (p *Protocol) SetClock(now func() time.Time) { p.now = now }

// Apply reads the slave and its expiring record together, asks decide what
// to do and writes the plan whole, conditioned on what was read. When a
// concurrent change wins the race, it reads and decides again, so the
// decision is always made on the state it changes; decide runs without the
// store held, and may be called again. It returns decide's error,
// machine.LimitError when the plan would exceed its decommission limit,
// and fault.Unavailable when it keeps losing races.
func (p *Protocol) Apply(ctx context.Context, id string, decide machine.Decide) error {
	_, err := p.apply(ctx, id, nil, false, decide)
	return err
}

// Import is Apply for an import's decision (machine.ImportSlave), which
// compares the slave's stored history: the snapshot carries it
// (machine.Snapshot.History), read after the slave and matched to it (a
// history whose newest entry is not the current state read is a change
// between the two reads, read again). An import that writes nothing (the
// slave is stored so already, or is a conflict) reads the slave and its
// history and writes nothing. The write is one step of the protocol like
// any other, conditioned on what was read (docs/decisions.md "Import").
func (p *Protocol) Import(ctx context.Context, id string, decide machine.Decide) error {
	_, err := p.apply(ctx, id, nil, true, decide)
	return err
}

// ApplyOnce is Apply for a change request that a client may retry. Its
// outcome is stored as a receipt, scoped by the caller and the key across
// every slave: a success in the write of the change, a refusal (only when
// the client named the request) right after. A request whose key has a
// receipt younger than machine.IdempotencyWindow gets that receipt's
// outcome without being decided again, and a key reused for another
// request is refused with machine.ReusedKey. Otherwise it returns what
// Apply returns.
func (p *Protocol) ApplyOnce(ctx context.Context, id string, once machine.Idempotency, decide machine.Decide) error {
	receipt := Receipt{Idempotency: once}
	seen, err := p.apply(ctx, id, &receipt, false, decide)
	if seen != nil {
		if seen.Fingerprint != once.Fingerprint {
			return machine.ReusedKey(once.Key)
		}
		return seen.Outcome
	}
	if once.Key != "" && Remembered(err) {
		// Best effort: without the receipt a retry is decided again, which
		// is safe because this refusal changed nothing.
		receipt.Outcome = &fault.Error{Kind: fault.KindOf(err), Message: fault.Message(err)}
		_ = p.store.Remember(ctx, receipt)
	}
	return err
}

// DryRun answers what Apply of decide would answer, and writes nothing:
// it reads the slave as a change does, decides on it with decide, and
// returns decide's refusal, or nil when the change would be applied (or
// would write nothing). It stores no receipt, not even of a refusal. The
// decommission limit is not asked: a store checks it only as it writes
// (docs/behaviour.md "Dry runs"). It returns fault.Unavailable when its
// reads keep colliding with writes.
func (p *Protocol) DryRun(ctx context.Context, id string, decide machine.Decide) error {
	return retry(ctx, id, func() error {
		read, err := p.store.Read(ctx, id, nil)
		if err != nil {
			return err
		}
		_, err = decide(read.Snapshot)
		return err
	})
}

// CreateBatch is how many slaves ApplyAbsent creates in one write: three
// items each (the slave, its first history entry and its feed entry) and
// up to FeedShards heads of the feed, DynamoDB's 100 items a transaction at
// most.
const CreateBatch = (100 - FeedShards) / 3

// ApplyAbsent applies decide's decision to each of ids, which the caller
// has reason to believe are not stored (a report's machines that its scan
// of the fleet did not find), without reading them one by one: each is
// decided on no slave, and the plans that create a slave and nothing else
// (the first report of a machine) are written CreateBatch at a time, in one
// write conditioned on none of them existing (Store.Create). That condition
// is the whole read: an expiring record is only written with its slave's
// state change and removed with the slave, so a slave that does not exist
// has none, and creating a slave neither joins nor leaves the
// decommissioning set. A batch that loses that race (one of its slaves was
// created meanwhile) or fails, and every id whose plan needs more than a
// create, is applied one at a time, as Apply does, 8 at a time. It returns
// each id's error, in the order of ids, nil where it applied.
//
// One write for 50 slaves instead of a read and a write each: on DynamoDB
// a first report of 100,000 machines pays no transactional read (600,000
// read units), and on the local emulator, which serves one request at a
// time and spends most of each on the request itself, a first report of
// 4,000 machines takes half a minute instead of over a minute
// (BENCHMARKS.md, "Reports on a busy local stack").
func (p *Protocol) ApplyAbsent(ctx context.Context, ids []string, decide func(id string) machine.Decide) []error {
	errs := make([]error, len(ids))
	var creates []Write
	var created, alone []int
	for i, id := range ids {
		plan, err := decide(id)(machine.Snapshot{})
		if err != nil || plan == nil || plan.Kind != machine.Creates || plan.Join || plan.PutExpiring != nil {
			alone = append(alone, i) // decided again on what is stored
			continue
		}
		creates, created = append(creates, p.write(id, Read{}, plan, nil)), append(created, i)
	}
	for start := 0; start < len(creates); start += CreateBatch {
		end := min(start+CreateBatch, len(creates))
		if err := p.create(ctx, creates[start:end]); err != nil {
			alone = append(alone, created[start:end]...)
		}
	}
	var g errgroup.Group
	g.SetLimit(8)
	for _, i := range alone {
		g.Go(func() error {
			errs[i] = p.Apply(ctx, ids[i], decide(ids[i]))
			return nil
		})
	}
	g.Wait()
	return errs
}

// createAttempts bounds how often ApplyAbsent writes a batch of creates.
const createAttempts = 3

// create writes a batch of creates, and again, a few times, after losing a
// race: every change of a slave moves a head of the feed, and a batch is
// conditioned on nearly all of them, so a change anywhere between the read
// of the heads and the write makes it lose (Create reads them afresh). A
// batch that keeps losing may be losing to one of its slaves created
// meanwhile, which only applying them one at a time tells apart.
func (p *Protocol) create(ctx context.Context, ws []Write) error {
	var err error
	for attempt := range createAttempts {
		if attempt > 0 {
			if err := Wait(ctx, attempt-1); err != nil {
				return err
			}
		}
		if err = p.store.Create(ctx, ws); !errors.Is(err, ErrRace) {
			return err
		}
	}
	return err
}

// Remembered reports whether err is an answer a retry gets again: a
// refusal by a decision or by the decommission limit, not a failure to
// store.
func Remembered(err error) bool {
	switch fault.KindOf(err) {
	case fault.KindInvalid, fault.KindNotFound, fault.KindConflict:
		return true
	}
	return false
}

// apply decides and writes the plan, with the receipt when there is one.
// A live receipt already stored under the receipt's key answers the
// request instead: apply returns it and decides nothing. With history, the
// snapshot carries the slave's stored history.
func (p *Protocol) apply(ctx context.Context, id string, receipt *Receipt, history bool, decide machine.Decide) (*Receipt, error) {
	var seen *Receipt
	err := retry(ctx, id, func() error {
		read, err := p.store.Read(ctx, id, receipt)
		if err != nil {
			return err
		}
		if history && read.Snapshot.Slave != nil {
			if read.Snapshot.History, err = p.history(ctx, *read.Snapshot.Slave); err != nil {
				return err
			}
		}
		if receipt != nil && read.Receipt != nil && read.Receipt.Live(receipt.At) {
			seen = read.Receipt
			return nil
		}
		plan, err := decide(read.Snapshot)
		if err != nil || plan == nil {
			return err
		}
		if plan.Kind == 0 {
			return fmt.Errorf("change %s: the decision names no kind of write", id)
		}
		return p.store.Write(ctx, p.write(id, read, plan, receipt))
	})
	return seen, err
}

// history reads slave's stored history, oldest first, and ErrRace unless
// its newest entry is slave's current state: the slave changed after it
// was read.
func (p *Protocol) history(ctx context.Context, slave machine.Slave) ([]machine.Update, error) {
	h, err := p.store.History(ctx, slave.ID, p.now(), machine.MaxImportHistory+1)
	if err != nil {
		return nil, err
	}
	if len(h) == 0 || h[0] != slave.Current {
		return nil, ErrRace
	}
	slices.Reverse(h)
	return h, nil
}

// write completes a decision into what the store writes: the retention of
// the entry a state change supersedes, the receipt, and the change's feed
// entry.
func (p *Protocol) write(id string, read Read, plan *machine.Plan, receipt *Receipt) Write {
	w := Write{ID: id, Read: read, Plan: plan, Receipt: receipt}
	if plan.Kind == machine.Transitions && p.retention > 0 {
		// The entry of the state being left is superseded now: from here on
		// it may expire, counted from now, so the state a slave just left is
		// always in its history. The current state's entry never carries a
		// TTL, so a slave that has not changed for longer than the retention
		// keeps it.
		w.Supersedes = (plan.Entry.Timestamp + p.retention.Milliseconds()) / 1000
	}
	if plan.Kind == machine.Imports && p.retention > 0 {
		// An imported entry keeps its own time, which may be long past:
		// the entries it brings are superseded here and now, and kept for
		// the retention from the import, as this service keeps the state a
		// slave just left.
		w.Supersedes = (p.now().UnixMilli() + p.retention.Milliseconds()) / 1000
	}
	w.Changes = p.feedChanges(id, read, plan)
	return w
}

// Delete removes the slave, its whole history and its expiring record, and
// reports whether it did. With match set, it removes the slave only while
// match holds for it: a change between the read and the removal makes it
// read and match again. It returns fault.Unavailable when it keeps losing
// races.
func (p *Protocol) Delete(ctx context.Context, id string, match func(machine.Slave) bool) (bool, error) {
	removed := false
	err := retry(ctx, id, func() error {
		read, err := p.store.Read(ctx, id, nil)
		if err != nil {
			return err
		}
		slave := read.Snapshot.Slave
		if slave == nil || match != nil && !match(*slave) {
			return nil
		}
		now := p.now().UnixMilli()
		gone := Change{SlaveID: id, Kind: Deleted, At: now, Written: now, Shard: ShardOf(id), Seq: read.Head + 1, Before: new(cloneSlave(*slave))}
		if err := p.store.Remove(ctx, id, read.Version, slave.Current.State.CountsTowardLimit(), gone); err != nil {
			return err
		}
		removed = true
		return nil
	})
	return removed, err
}

// DeleteExpiring deletes the slave's expiring record, if any, as decided
// by machine.DeleteExpiring.
func (p *Protocol) DeleteExpiring(ctx context.Context, id string) error {
	return p.Apply(ctx, id, machine.DeleteExpiring)
}

// DeleteDead removes every DEAD slave whose state changed before the epoch
// ms before, with its history and expiring record, 8 at a time, and
// returns how many it removed. A slave that leaves DEAD in the meantime is
// kept.
func (p *Protocol) DeleteDead(ctx context.Context, before int64) (int, error) {
	match := func(sl machine.Slave) bool {
		return sl.Current.State == machine.Dead && sl.Current.Timestamp < before
	}
	var dead []string
	err := p.store.ListByState(ctx, machine.Dead, func(sl machine.Slave) error {
		if match(sl) {
			dead = append(dead, sl.ID)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	var (
		mu      sync.Mutex
		removed int
		errs    []error
		g       errgroup.Group
	)
	g.SetLimit(8)
	for _, id := range dead {
		g.Go(func() error {
			ok, err := p.Delete(ctx, id, match)
			mu.Lock()
			defer mu.Unlock()
			if ok {
				removed++
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("delete dead slave %s: %w", id, err))
			}
			return nil
		})
	}
	g.Wait()
	return removed, errors.Join(errs...)
}
