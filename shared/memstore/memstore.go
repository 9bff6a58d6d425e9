// Package memstore keeps slaves, their history, expiring records and
// change receipts in memory, with the semantics of the DynamoDB adapter
// (shared/dynamo). Like it, it is a driver of the change protocol
// (shared/change): it implements only a consistent read and writes
// conditioned on what was read, and the protocol decides, retries and
// keeps receipts. Tests use it wherever they
// need a store but not DynamoDB; shared/storetest runs the same contract
// against it and against dynamo.Store, so the two cannot drift apart
// (docs/architecture.md "The fake store and its contract").
package memstore

import (
	"cmp"
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetops/fleet/shared/change"
	"github.com/fleetops/fleet/shared/machine"
)

// expiringRetention is how long an expiring record stays listed after it
// fell due, and after a deferred revert was last kept (docs/tables.md
// "Expiring"): the table's TTL.
const expiringRetention = 7 * 24 * time.Hour

// Store is an in-memory store, safe for concurrent use. The zero value is
// not usable: call New. Changes (Apply, ApplyOnce, Delete, DeleteDead,
// DeleteExpiring) are the change protocol's, over the primitives of driver.
type Store struct {
	*change.Protocol

	mu       sync.Mutex
	slaves   map[string]*slaveItem
	expiring map[string]*expiringItem
	receipts map[receiptKey]change.Receipt
	// The decommissioning set: the slaves counting toward the limit, and
	// when the last change that entered or left it took effect.
	members map[string]bool
	lastAt  int64
	feed    feed // the change feed (feed.go)
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

// New returns an empty store. A history entry expires historyRetention
// after it was superseded; 0 keeps every entry.
func New(historyRetention time.Duration) *Store {
	s := &Store{
		slaves:   map[string]*slaveItem{},
		expiring: map[string]*expiringItem{},
		receipts: map[receiptKey]change.Receipt{},
		members:  map[string]bool{},
		feed:     newFeed(),
	}
	s.Protocol = change.New((*driver)(s), historyRetention)
	return s
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
	s.expiring[e.MachineID] = newExpiringItem(e, e.DueAt())
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

// driver is the store as the change protocol's driver (change.Store).
type driver Store

// Read takes a snapshot of the slave, its expiring record, the
// decommissioning set and the receipt under key's key, if any.
func (d *driver) Read(ctx context.Context, id string, key *change.Receipt) (change.Read, error) {
	if err := ctx.Err(); err != nil {
		return change.Read{}, err
	}
	s := (*Store)(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := change.Read{Snapshot: machine.Snapshot{LimitAt: s.lastAt}, Head: s.head(change.ShardOf(id))}
	if key != nil && key.Key != "" {
		if rec, ok := s.receipts[scope(key.Idempotency)]; ok {
			r.Receipt = &rec
		}
	}
	if item, ok := s.slaves[id]; ok {
		slave := cloneSlave(item.slave)
		r.Snapshot.Slave, r.Version = &slave, item.version
	}
	if e, ok := s.expiring[id]; ok {
		record := cloneExpiring(e.record)
		r.Snapshot.Expiring = &record
	}
	return r, nil
}

// Write carries out w if what it read still holds: the kind of write its
// plan names, the expiring record alone, the description alone, or a slave
// created or changed with everything that goes with it.
func (d *driver) Write(ctx context.Context, w change.Write) error {
	s := (*Store)(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	id, r, plan := w.ID, w.Read, w.Plan
	switch plan.Kind {
	case machine.DropsExpiring:
		if !s.expiringIs(id, r.Snapshot.Expiring) || !s.headIs(w.Changes) {
			return change.ErrRace
		}
		delete(s.expiring, id)
		if item := s.slaves[id]; item != nil && len(w.Changes) > 0 {
			item.slave.Sequence = w.Sequence()
		}
		s.appendChanges(w.Changes)
		return nil
	case machine.Imports:
		return s.importSlave(w)
	case machine.Describes:
		item := s.slaves[id]
		if item == nil || item.version != r.Version || item.slave.DescribedAt != r.Snapshot.Slave.DescribedAt || !s.headIs(w.Changes) {
			return change.ErrRace
		}
		write(&item.slave, cloneSlave(plan.Slave), plan)
		item.slave.Sequence = w.Sequence()
		s.appendChanges(w.Changes)
		return nil
	}
	return s.change(w)
}

// Create creates the slaves of ws, all or none: none when any exists, or
// when ws names one twice (DynamoDB refuses such a transaction).
func (d *driver) Create(ctx context.Context, ws []change.Write) error {
	s := (*Store)(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	named := map[string]bool{}
	for _, w := range ws {
		if s.slaves[w.ID] != nil || named[w.ID] {
			return change.ErrRace
		}
		named[w.ID] = true
	}
	for _, w := range ws {
		if len(w.Changes) > 0 {
			// Positions are taken here, after the heads as they are.
			w.Read.Head = s.head(w.Changes[0].Shard)
			w.Changes = slices.Clone(w.Changes)
			for i := range w.Changes {
				w.Changes[i].Seq = w.Read.Head + int64(i) + 1
			}
		}
		if err := s.change(w); err != nil {
			return err // none exists: only a create that is not one fails
		}
	}
	return nil
}

// change writes a state change: the slave's state (and its description
// when the plan says so), the entry, the expiring record, the receipt and
// the decommissioning set, all or nothing. s.mu is held.
func (s *Store) change(w change.Write) error {
	id, r, plan := w.ID, w.Read, w.Plan
	item := s.slaves[id]
	if (item == nil) != (plan.Kind == machine.Creates) || item != nil && item.version != r.Version || !s.headIs(w.Changes) {
		return change.ErrRace
	}
	entry, slave := *plan.Entry, cloneSlave(plan.Slave)
	entry.SlaveID, slave.ID, slave.Current.SlaveID = id, id, id
	if plan.Join || plan.Leave {
		if s.lastAt != r.Snapshot.LimitAt {
			return change.ErrRace
		}
		if plan.Join && plan.Limit > 0 && len(s.members) >= plan.Limit {
			return machine.LimitError(len(s.members), plan.Limit)
		}
	}
	if plan.PutExpiring != nil && s.expiring[id] != nil || plan.DropExpiring && !s.expiringIs(id, r.Snapshot.Expiring) {
		return change.ErrRace
	}
	var key receiptKey
	if w.Receipt != nil && w.Receipt.Key != "" {
		key = scope(w.Receipt.Idempotency)
		if prev, ok := s.receipts[key]; ok && prev.Live(w.Receipt.At) {
			return change.ErrRace
		}
	}

	if item == nil {
		item = &slaveItem{slave: slave}
		s.slaves[id] = item
	} else {
		if w.Supersedes != 0 {
			item.history[len(item.history)-1].expiresAt = w.Supersedes
		}
		write(&item.slave, slave, plan)
	}
	item.version++
	item.history = append(item.history, historyItem{update: entry})
	switch {
	case plan.PutExpiring != nil:
		s.expiring[id] = newExpiringItem(*plan.PutExpiring, plan.ExpiringKeptFrom())
	case plan.DropExpiring:
		delete(s.expiring, id)
	}
	if key.key != "" {
		s.receipts[key] = change.Receipt{Idempotency: w.Receipt.Idempotency}
	}
	s.moveSet(id, plan)
	if len(w.Changes) > 0 {
		item.slave.Sequence = w.Sequence()
	}
	s.appendChanges(w.Changes)
	return nil
}

// importSlave writes an imported slave whole, with its history and
// expiring record, in place of the one read when the plan replaces it and
// only while there is none otherwise, all or nothing. s.mu is held.
func (s *Store) importSlave(w change.Write) error {
	id, r, plan := w.ID, w.Read, w.Plan
	item := s.slaves[id]
	if (item != nil) != plan.Replace || item != nil && item.version != r.Version || !s.headIs(w.Changes) {
		return change.ErrRace
	}
	if plan.DropExpiring && !s.expiringIs(id, r.Snapshot.Expiring) || !plan.DropExpiring && s.expiring[id] != nil {
		return change.ErrRace
	}
	if plan.Join || plan.Leave {
		if s.lastAt != r.Snapshot.LimitAt {
			return change.ErrRace
		}
		if plan.Join && plan.Limit > 0 && len(s.members) >= plan.Limit {
			return machine.LimitError(len(s.members), plan.Limit)
		}
	}
	slave := cloneSlave(plan.Slave)
	slave.ID, slave.Current.SlaveID, slave.Sequence = id, id, w.Sequence()
	item = &slaveItem{slave: slave, version: int64(len(plan.History))}
	for i, u := range plan.History {
		h := historyItem{update: u}
		if i < len(plan.History)-1 {
			h.expiresAt = w.Supersedes
		}
		item.history = append(item.history, h)
	}
	s.slaves[id] = item
	delete(s.expiring, id)
	if plan.PutExpiring != nil {
		s.expiring[id] = newExpiringItem(*plan.PutExpiring, plan.ExpiringKeptFrom())
	}
	s.moveSet(id, plan)
	s.appendChanges(w.Changes)
	return nil
}

// moveSet joins or leaves the decommissioning set as plan says, moving
// the set's time to the plan's. s.mu is held.
func (s *Store) moveSet(id string, plan *machine.Plan) {
	switch {
	case plan.Join:
		s.members[id] = true
	case plan.Leave:
		delete(s.members, id)
	default:
		return
	}
	s.lastAt = plan.SetAt
}

// Remember stores a refusal's receipt unless a live one holds its key.
func (d *driver) Remember(ctx context.Context, r change.Receipt) error {
	s := (*Store)(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	key := scope(r.Idempotency)
	if prev, ok := s.receipts[key]; !ok || !prev.Live(r.At) {
		s.receipts[key] = r
	}
	return nil
}

// Remove deletes the slave, its history and its expiring record, and takes
// it out of the decommissioning set, if it is still at version.
func (d *driver) Remove(ctx context.Context, id string, version int64, leave bool, gone change.Change) error {
	s := (*Store)(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	if item, ok := s.slaves[id]; !ok || item.version != version || !s.headIs([]change.Change{gone}) {
		return change.ErrRace
	}
	s.appendChanges([]change.Change{gone})
	delete(s.slaves, id)
	delete(s.expiring, id)
	delete(s.members, id)
	return nil
}

// History is Store.History.
func (d *driver) History(ctx context.Context, id string, now time.Time, limit int) ([]machine.Update, error) {
	return (*Store)(d).History(ctx, id, now, limit)
}

// ListByState is Store.ListByState.
func (d *driver) ListByState(ctx context.Context, state machine.State, each func(machine.Slave) error) error {
	return (*Store)(d).ListByState(ctx, state, each)
}

// expiringIs reports whether the slave's expiring record is still the one
// read: the same action. A nil read never matches, as a conditional delete
// of a record that was not read fails.
func (s *Store) expiringIs(id string, read *machine.Expiring) bool {
	e, ok := s.expiring[id]
	return ok && read != nil && e.record.ActionID == read.ActionID
}

// write copies into dst the parts of src that plan names (machine.Plan),
// and nothing else: the current state of a Transitions plan, the
// description when Describe is set, the running-task count when Tasks is.
func write(dst *machine.Slave, src machine.Slave, plan *machine.Plan) {
	if plan.Kind == machine.Transitions {
		dst.Current = src.Current
	}
	if plan.Describe {
		dst.Host, dst.RackID, dst.DescribedAt = src.Host, src.RackID, src.DescribedAt
		dst.Attributes, dst.Resources = src.Attributes, src.Resources
		if dst.Attributes == nil {
			dst.Attributes = map[string]string{}
		}
	}
	if plan.Tasks {
		dst.RunningTasks = src.RunningTasks
	}
}

// newExpiringItem is e as stored, kept pending until expiringRetention
// past keptFrom (epoch ms; Plan.ExpiringKeptFrom).
func newExpiringItem(e machine.Expiring, keptFrom int64) *expiringItem {
	return &expiringItem{record: cloneExpiring(e), expiresAt: keptFrom/1000 + int64(expiringRetention.Seconds())}
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
