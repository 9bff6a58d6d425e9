// Package memstore keeps slaves, their history, expiring records and
// change receipts in memory, with the semantics of the DynamoDB adapter
// (shared/dynamo): every change is decided by the machine package on a
// snapshot and written whole, conditioned on what was read, and a change
// that lost a race is read and decided again. Tests use it wherever they
// need a store but not DynamoDB; shared/storetest runs the same contract
// against it and against dynamo.Store, so the two cannot drift apart
// (docs/architecture.md "The fake store and its contract").
package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"
)

// attempts bounds how often a change is read and decided again after losing
// a race, as in the DynamoDB adapter.
const attempts = 12

// expiringRetention is how long an expiring record stays listed after it
// fell due, and after a deferred revert was last kept (docs/tables.md
// "Expiring"): the table's TTL.
const expiringRetention = 7 * 24 * time.Hour

// Store is an in-memory store, safe for concurrent use. The zero value is
// not usable: call New.
type Store struct {
	historyRetention time.Duration

	mu       sync.Mutex
	slaves   map[string]*slaveItem
	expiring map[string]*expiringItem
	receipts map[receiptKey]receipt
	// The decommissioning set: the slaves counting toward the limit, and
	// when the last change that entered or left it took effect.
	members map[string]bool
	lastAt  int64
}

type slaveItem struct {
	slave   machine.Slave
	version int64         // state changes so far; the seq of the newest entry
	history []historyItem // oldest first
}

type historyItem struct {
	update    machine.Update
	expiresAt int64 // epoch s; 0 while the entry is current
}

type expiringItem struct {
	record    machine.Expiring
	expiresAt int64 // epoch s
}

// receiptKey is the scope of an Idempotency-Key: the caller, across every
// slave and action.
type receiptKey struct{ caller, key string }

func scope(once machine.Idempotency) receiptKey { return receiptKey{once.Caller, once.Key} }

// receipt is the first answer to a change request.
type receipt struct {
	fingerprint string
	at          int64 // epoch ms of the first request
	outcome     error // nil for success, else a *fault.Error
}

// New returns an empty store. A history entry expires historyRetention
// after it was superseded; 0 keeps every entry.
func New(historyRetention time.Duration) *Store {
	return &Store{
		historyRetention: historyRetention,
		slaves:           map[string]*slaveItem{},
		expiring:         map[string]*expiringItem{},
		receipts:         map[receiptKey]receipt{},
		members:          map[string]bool{},
	}
}

// Put stores slave as it is, with its history (oldest first; its current
// state alone when none is given), replacing any slave of that id. It
// decides nothing: tests use it to start from a given fleet.
func (s *Store) Put(slave machine.Slave, history ...machine.Update) {
	if len(history) == 0 {
		history = []machine.Update{slave.Current}
	}
	item := &slaveItem{slave: cloneSlave(slave), version: int64(len(history))}
	for _, u := range history {
		item.history = append(item.history, historyItem{update: u})
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.slaves[slave.ID] = item
	delete(s.members, slave.ID)
	if slave.Current.State.CountsTowardLimit() {
		s.members[slave.ID] = true
	}
}

// PutExpiring stores an expiring record as it is, whether or not its slave
// exists, replacing any record of that slave.
func (s *Store) PutExpiring(e machine.Expiring) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expiring[e.MachineID] = newExpiringItem(e)
}

// Get returns the slave with id, or nil when there is none.
func (s *Store) Get(ctx context.Context, id string) (*machine.Slave, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	item, ok := s.slaves[id]
	if !ok {
		return nil, nil
	}
	slave := cloneSlave(item.slave)
	return &slave, nil
}

// List calls each with every slave, one at a time; dynamo's order is no
// order, and this one is by id. It stops at the first error, each's
// included, which it returns.
func (s *Store) List(ctx context.Context, each func(machine.Slave) error) error {
	return s.each(ctx, func(machine.Slave) bool { return true }, each)
}

// ListByState calls each with the slaves in state, one at a time, in id
// order. It stops at the first error, each's included, which it returns.
func (s *Store) ListByState(ctx context.Context, state machine.State, each func(machine.Slave) error) error {
	return s.each(ctx, func(sl machine.Slave) bool { return sl.Current.State == state }, each)
}

// each calls f with the slaves keep accepts, in id order, from a copy taken
// under the lock, so that f may use the store.
func (s *Store) each(ctx context.Context, keep func(machine.Slave) bool, f func(machine.Slave) error) error {
	list, err := s.list(ctx, keep)
	if err != nil {
		return err
	}
	for _, sl := range list {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := f(sl); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) list(ctx context.Context, keep func(machine.Slave) bool) ([]machine.Slave, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []machine.Slave
	for _, id := range slices.Sorted(maps.Keys(s.slaves)) {
		if sl := s.slaves[id].slave; keep(sl) {
			out = append(out, cloneSlave(sl))
		}
	}
	return out, nil
}

// History returns the newest limit entries of the slave's history at now,
// newest first, leaving out the entries past their retention.
func (s *Store) History(ctx context.Context, id string, now time.Time, limit int) ([]machine.Update, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	item, ok := s.slaves[id]
	if !ok {
		return nil, nil
	}
	var out []machine.Update
	for i := len(item.history) - 1; i >= 0 && len(out) < limit; i-- {
		if h := item.history[i]; h.expiresAt == 0 || h.expiresAt > now.Unix() {
			out = append(out, h.update)
		}
	}
	return out, nil
}

// ListExpiring returns the expiring records of existing slaves that are
// still kept at now, sorted by machine id.
func (s *Store) ListExpiring(ctx context.Context, now time.Time) ([]machine.Expiring, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []machine.Expiring
	for _, id := range slices.Sorted(maps.Keys(s.expiring)) {
		e := s.expiring[id]
		if _, ok := s.slaves[id]; ok && e.expiresAt > now.Unix() {
			out = append(out, cloneExpiring(e.record))
		}
	}
	return out, nil
}

// Due returns the expiring records due at now (due before now), oldest
// first, with the time each fell due.
func (s *Store) Due(ctx context.Context, now int64) ([]machine.Due, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []machine.Due
	for id, e := range s.expiring {
		if at := e.record.DueAt(); at < now {
			out = append(out, machine.Due{SlaveID: id, At: at})
		}
	}
	slices.SortFunc(out, func(a, b machine.Due) int {
		return cmp.Or(cmp.Compare(a.At, b.At), strings.Compare(a.SlaveID, b.SlaveID))
	})
	return out, nil
}

// KeepDeferred keeps the slave's expiring record listed for
// expiringRetention past now, moving it at most once a day.
func (s *Store) KeepDeferred(ctx context.Context, id string, now int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	at := now/1000 + int64(expiringRetention.Seconds())
	if e, ok := s.expiring[id]; ok && e.expiresAt < at-24*3600 {
		e.expiresAt = at
	}
	return nil
}

// DeleteExpiring deletes the slave's expiring record, if any.
func (s *Store) DeleteExpiring(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.expiring, id)
	return nil
}

// Apply reads the slave and its expiring record, asks decide what to do and
// writes the plan whole, on condition that nothing it was decided from
// changed meanwhile; otherwise it reads and decides again. decide runs
// without the store locked, so it may itself change the store, as a
// concurrent request would. It returns decide's error, machine.LimitError
// when the plan would exceed its decommission limit, and fault.Unavailable
// when it keeps losing races.
func (s *Store) Apply(ctx context.Context, id string, decide machine.Decide) error {
	_, err := s.apply(ctx, id, nil, decide)
	return err
}

// ApplyOnce is Apply for a change request that a client may retry: a
// request whose key was answered less than machine.IdempotencyWindow ago
// gets that answer without being decided again, and a key reused for
// another request is refused with machine.ReusedKey. Successful changes and
// refusals are remembered; a request without a key is always decided.
func (s *Store) ApplyOnce(ctx context.Context, id string, once machine.Idempotency, decide machine.Decide) error {
	first, err := s.apply(ctx, id, &once, decide)
	if first != nil {
		if first.fingerprint != once.Fingerprint {
			return machine.ReusedKey(once.Key)
		}
		return first.outcome
	}
	if once.Key != "" && replayed(err) {
		s.mu.Lock()
		key := scope(once)
		if r, ok := s.receipts[key]; !ok || !r.live(once.At) {
			s.receipts[key] = receipt{fingerprint: once.Fingerprint, at: once.At, outcome: &fault.Error{Kind: fault.KindOf(err), Message: fault.Message(err)}}
		}
		s.mu.Unlock()
	}
	return err
}

// replayed reports whether err is an answer a retry gets again: a refusal
// by a decision or by the decommission limit, not a failure to store.
func replayed(err error) bool {
	switch fault.KindOf(err) {
	case fault.KindInvalid, fault.KindNotFound, fault.KindConflict:
		return true
	}
	return false
}

func (r receipt) live(now int64) bool { return now-r.at < machine.IdempotencyWindow.Milliseconds() }

// errRace is a write refused because what it was decided from changed.
var errRace = errors.New("lost a race with a concurrent change")

// read is what a change is decided and conditioned on.
type read struct {
	snap    machine.Snapshot
	version int64 // 0 when there is no slave
	lastAt  int64
}

func (s *Store) apply(ctx context.Context, id string, once *machine.Idempotency, decide machine.Decide) (*receipt, error) {
	for attempt := range attempts {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		r, first := s.read(id, once)
		if first != nil {
			return first, nil
		}
		plan, err := decide(r.snap)
		if err != nil || plan == nil {
			return nil, err
		}
		if err := s.write(id, r, plan, once); !errors.Is(err, errRace) {
			return nil, err
		}
		time.Sleep(time.Duration(1<<attempt)*time.Millisecond + rand.N(time.Millisecond))
	}
	return nil, fault.Unavailable("too many concurrent changes of slave %s, try again", id)
}

// read takes a snapshot of the slave, its expiring record and the
// decommissioning set, or returns the live receipt of once's key.
func (s *Store) read(id string, once *machine.Idempotency) (read, *receipt) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if once != nil && once.Key != "" {
		if r, ok := s.receipts[scope(*once)]; ok && r.live(once.At) {
			return read{}, &r
		}
	}
	r := read{lastAt: s.lastAt}
	if item, ok := s.slaves[id]; ok {
		slave := cloneSlave(item.slave)
		r.snap.Slave, r.version = &slave, item.version
	}
	if e, ok := s.expiring[id]; ok {
		record := cloneExpiring(e.record)
		r.snap.Expiring = &record
	}
	return r, nil
}

// write applies plan if what r read still holds: the expiring record alone,
// the description alone, or a state change with everything that goes with
// it. It returns errRace when something changed.
func (s *Store) write(id string, r read, plan *machine.Plan, once *machine.Idempotency) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case plan.Entry == nil && plan.DropExpiring:
		if !s.expiringIs(id, r.snap.Expiring) {
			return errRace
		}
		delete(s.expiring, id)
		return nil
	case plan.Entry == nil:
		item := s.slaves[id]
		if item == nil || item.version != r.version || item.slave.DescribedAt != r.snap.Slave.DescribedAt {
			return errRace
		}
		describe(&item.slave, cloneSlave(plan.Slave))
		return nil
	}
	return s.change(id, r, plan, once)
}

// change writes a plan with a history entry: the slave's state (and its
// description when the plan says so), the entry, the expiring record, the
// receipt and the decommissioning set, all or nothing. s.mu is held.
func (s *Store) change(id string, r read, plan *machine.Plan, once *machine.Idempotency) error {
	item := s.slaves[id]
	if item == nil && r.version != 0 || item != nil && item.version != r.version {
		return errRace
	}
	entry, slave := *plan.Entry, cloneSlave(plan.Slave)
	entry.SlaveID, slave.ID, slave.Current.SlaveID = id, id, id
	was := r.snap.Slave != nil && r.snap.Slave.Current.State.CountsTowardLimit()
	join, leave := entry.State.CountsTowardLimit() && !was, was && !entry.State.CountsTowardLimit()
	if join || leave {
		if s.lastAt != r.lastAt {
			return errRace
		}
		if join && plan.Limit > 0 && len(s.members) >= plan.Limit {
			return machine.LimitError(len(s.members), plan.Limit)
		}
		entry.Timestamp = machine.AfterLimitChange(entry.Timestamp, r.lastAt)
		slave.Current.Timestamp = entry.Timestamp
	}
	if plan.PutExpiring != nil && s.expiring[id] != nil || plan.DropExpiring && !s.expiringIs(id, r.snap.Expiring) {
		return errRace
	}
	var key receiptKey
	if once != nil && once.Key != "" {
		key = scope(*once)
		if prev, ok := s.receipts[key]; ok && prev.live(once.At) {
			return errRace
		}
	}

	if item == nil {
		item = &slaveItem{slave: slave}
		s.slaves[id] = item
	} else {
		if s.historyRetention > 0 {
			// The entry being superseded may expire from now on.
			item.history[len(item.history)-1].expiresAt = (entry.Timestamp + s.historyRetention.Milliseconds()) / 1000
		}
		if plan.Describe {
			describe(&item.slave, slave)
		} else if !slave.Current.State.Draining() {
			item.slave.RunningTasks = nil // leaving the draining states clears the count
		}
		item.slave.Current = slave.Current
	}
	item.version++
	item.history = append(item.history, historyItem{update: entry})
	switch {
	case plan.PutExpiring != nil:
		s.expiring[id] = newExpiringItem(*plan.PutExpiring)
	case plan.DropExpiring:
		delete(s.expiring, id)
	}
	if key.key != "" {
		s.receipts[key] = receipt{fingerprint: once.Fingerprint, at: once.At}
	}
	if join {
		s.members[id] = true
	}
	if leave {
		delete(s.members, id)
	}
	if join || leave {
		s.lastAt = entry.Timestamp
	}
	return nil
}

// expiringIs reports whether the slave's expiring record is still the one
// read: the same action. A nil read never matches, as a conditional delete
// of a record that was not read fails.
func (s *Store) expiringIs(id string, read *machine.Expiring) bool {
	e, ok := s.expiring[id]
	return ok && read != nil && e.record.ActionID == read.ActionID
}

// describe copies a report's description from src into dst, and nothing
// else.
func describe(dst *machine.Slave, src machine.Slave) {
	dst.Host, dst.RackID, dst.DescribedAt = src.Host, src.RackID, src.DescribedAt
	dst.Attributes, dst.Resources, dst.RunningTasks = src.Attributes, src.Resources, src.RunningTasks
	if dst.Attributes == nil {
		dst.Attributes = map[string]string{}
	}
}

// Delete removes the slave, its whole history and its expiring record, and
// reports whether it did. With match set, it removes the slave only while
// match holds for it; match runs without the store locked.
func (s *Store) Delete(ctx context.Context, id string, match func(machine.Slave) bool) (bool, error) {
	for attempt := range attempts {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		s.mu.Lock()
		item, ok := s.slaves[id]
		var slave machine.Slave
		var version int64
		if ok {
			slave, version = cloneSlave(item.slave), item.version
		}
		s.mu.Unlock()
		if !ok || match != nil && !match(slave) {
			return false, nil
		}
		s.mu.Lock()
		if item, ok := s.slaves[id]; ok && item.version == version {
			delete(s.slaves, id)
			delete(s.expiring, id)
			delete(s.members, id)
			s.mu.Unlock()
			return true, nil
		}
		s.mu.Unlock()
		time.Sleep(time.Duration(1<<attempt) * time.Millisecond)
	}
	return false, fault.Unavailable("too many concurrent changes of slave %s, try again", id)
}

// DeleteDead removes every DEAD slave whose state changed before the epoch
// ms before, with its history and expiring record, and returns how many it
// removed. A slave that leaves DEAD in the meantime is kept.
func (s *Store) DeleteDead(ctx context.Context, before int64) (int, error) {
	dead, err := s.list(ctx, func(sl machine.Slave) bool { return sl.Current.State == machine.Dead })
	if err != nil {
		return 0, err
	}
	match := func(sl machine.Slave) bool { return sl.Current.State == machine.Dead && sl.Current.Timestamp < before }
	removed := 0
	var errs []error
	for _, sl := range dead {
		if !match(sl) {
			continue
		}
		ok, err := s.Delete(ctx, sl.ID, match)
		if ok {
			removed++
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("delete dead slave %s: %w", sl.ID, err))
		}
	}
	return removed, errors.Join(errs...)
}

func newExpiringItem(e machine.Expiring) *expiringItem {
	return &expiringItem{record: cloneExpiring(e), expiresAt: e.DueAt()/1000 + int64(expiringRetention.Seconds())}
}

// cloneSlave returns s sharing nothing with the stored slave, as a read from
// a database does.
func cloneSlave(s machine.Slave) machine.Slave {
	s.Attributes = maps.Clone(s.Attributes)
	if s.Attributes == nil {
		s.Attributes = map[string]string{}
	}
	if len(s.Resources) == 0 {
		s.Resources = nil
	} else {
		s.Resources = json.RawMessage(slices.Clone(s.Resources))
	}
	if s.RunningTasks != nil {
		s.RunningTasks = new(*s.RunningTasks)
	}
	return s
}

func cloneExpiring(e machine.Expiring) machine.Expiring {
	if d := e.Request.DurationMillis; d != nil {
		e.Request.DurationMillis = new(*d)
	}
	if st := e.Request.RevertToState; st != nil {
		e.Request.RevertToState = new(*st)
	}
	return e
}
