package change

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"

	"golang.org/x/sync/errgroup"
)

// The change feed (docs/behaviour.md "The change feed", docs/decisions.md
// "A change feed positioned in the change's own transaction"): every change
// of a slave is also written, in the write that applies it, as an entry of
// the feed at the next position of the slave's shard, conditioned on the
// shard's head being still the one read with the slave. A position is then
// taken only by a change that commits, in the order the changes of a shard
// commit, so a reader that has seen position n of a shard has seen every
// earlier one, whatever the writers' clocks say: no later commit can take a
// position behind a cursor. A cursor is the position reached in each shard.

// FeedShards is how many shards the feed is spread over: a slave's changes
// all go to the shard of its id (ShardOf), in order, and changes of
// different shards never wait for each other.
const FeedShards = 16

// Heads are every shard's newest position (Seqs), and when the entry at
// that position was written (Written, epoch ms; 0 where it is not known: a
// shard with no entry, or a head last moved before heads kept the time).
type Heads struct {
	Seqs    [FeedShards]int64
	Written [FeedShards]int64
}

// FeedRetention is how long a change stays in the feed, and how long a
// cursor may be followed from: an older cursor is refused with a 410.
const FeedRetention = 24 * time.Hour

// FeedPage bounds the changes of one answer of the feed, well within a
// buffered response (a change with its slave is about 600 bytes of JSON).
const FeedPage = 1000

// ListSettle is how far back a list's corrections reach (Protocol.Listed):
// a change that committed this long before the list began is taken to be
// in what the list read, even from DynamoDB's eventually consistent scan and
// its ByState index, which lag their writes by far less.
const ListSettle = 10 * time.Second

// FeedPoll is how often a request that waits for a change reads the feed
// again.
const FeedPoll = 500 * time.Millisecond

// Kind says what a change did.
type Kind string

// The kinds of change.
const (
	Added              Kind = "added"              // the slave's first report
	StateChanged       Kind = "stateChanged"       // a new history entry
	DescriptionChanged Kind = "descriptionChanged" // host, rack, attributes, resources or running tasks
	Deleted            Kind = "deleted"            // removed with its history
	ExpiringSet        Kind = "expiringSet"        // an expiring change made with a user's change
	ExpiringDeleted    Kind = "expiringDeleted"    // an expiring change deleted, by a user or by a change that made it pointless
	ExpiringReverted   Kind = "expiringReverted"   // an expiring change applied: its revert is the stateChanged before it
)

// Change is one entry of the feed.
type Change struct {
	SlaveID string
	Kind    Kind
	At      int64 // epoch ms: the entry's time, the report's for a description, the removal's for a deletion
	// Written is when the change was decided to be written (epoch ms, the
	// writer's clock): a report's time may be long past, so the feed's
	// retention and a list's look back count from this one.
	Written int64
	// Shard and Seq are the change's position, assigned by the store as it
	// writes it. Seq only grows from one change of a slave to the next (a
	// slave keeps its shard), so it is also the slave's sequence.
	Shard int
	Seq   int64
	// Entry is the history entry of Added and StateChanged, and Previous the
	// state StateChanged left.
	Entry    *machine.Update
	Previous machine.State
	// Slave is the slave as the change left it, at the change's sequence
	// (the store sets it as it writes the entry); nil when Deleted.
	Slave *machine.Slave
	// Before is the slave as it was, where the change replaced what
	// selectors read (a description, a deletion); nil when it is Slave
	// with the Previous state, or there was none.
	Before *machine.Slave
	// Expiring is the expiring record of the expiring kinds: the one set,
	// or the one deleted or applied.
	Expiring *machine.Expiring
}

// Picked reports whether a follower with sel is sent the change: its
// slave was picked before the change or after it, so a slave leaving the
// selection is seen leaving. A deletion written before deletions kept the
// slave they deleted is sent to every follower.
func (c Change) Picked(sel machine.Selector) bool {
	if sel.All() || c.Slave != nil && sel.Matches(*c.Slave) {
		return true
	}
	before := c.Before
	if before == nil && c.Kind == StateChanged && c.Slave != nil {
		was := *c.Slave
		was.Current.State = c.Previous
		before = &was
	}
	if before == nil {
		return c.Kind == Deleted
	}
	return sel.Matches(*before)
}

// ShardOf is the feed shard of a slave's changes.
func ShardOf(id string) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % FeedShards)
}

// Feed is what a store implements for the feed, besides writing each
// change's entry with it (Write, Create and Remove): a store assigns the
// entry of Write and Remove the position Change.Seq, which is the head read
// with the slave plus one, conditioned on the head being still that one,
// and the entries of Create positions after the heads it finds.
type Feed interface {
	// Heads reads every shard's newest position, consistently, and when
	// the entry there was written.
	Heads(ctx context.Context) (Heads, error)
	// Entries returns the entries of shard after position after, oldest
	// first, at most max.
	Entries(ctx context.Context, shard int, after int64, max int) ([]Change, error)
	// Before returns a position of shard at or below head such that every
	// entry up to head written at or after at is past it.
	Before(ctx context.Context, shard int, head, at int64) (int64, error)
	// FeedKey returns the key cursors are signed with, the same for every
	// instance of the service, created on first use.
	FeedKey(ctx context.Context) ([]byte, error)
}

// Cursor is a position in the feed: the position reached in each shard,
// and when it was answered.
type Cursor struct {
	Issued int64 // epoch ms
	Seqs   [FeedShards]int64
}

// cursorVersion is the first byte of an encoded cursor.
const cursorVersion = 1

// macSize is how much of the HMAC-SHA256 of a cursor it carries.
const macSize = 16

// errForged is the answer to a cursor this service did not issue.
func errForged() error {
	return fault.Invalid("query param since is not a cursor this service issued; list the slaves again for one")
}

// encode returns the cursor as the opaque text a client sends back, signed
// with key so that one it altered or made up is told apart.
func (c Cursor) encode(key []byte) string {
	b := []byte{cursorVersion}
	b = binary.AppendUvarint(b, uint64(c.Issued))
	for _, s := range c.Seqs {
		b = binary.AppendUvarint(b, uint64(s))
	}
	m := hmac.New(sha256.New, key)
	m.Write(b)
	b = m.Sum(b)[:len(b)+macSize]
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads a cursor that encode wrote with key: fault.Invalid for
// anything else.
func decodeCursor(s string, key []byte) (Cursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 1+macSize || b[0] != cursorVersion {
		return Cursor{}, errForged()
	}
	body, sum := b[:len(b)-macSize], b[len(b)-macSize:]
	m := hmac.New(sha256.New, key)
	m.Write(body)
	if !hmac.Equal(sum, m.Sum(nil)[:macSize]) {
		return Cursor{}, errForged()
	}
	var c Cursor
	rest := body[1:]
	next := func() (int64, bool) {
		v, n := binary.Uvarint(rest)
		if n <= 0 || v > 1<<62 {
			return 0, false
		}
		rest = rest[n:]
		return int64(v), true
	}
	var ok bool
	if c.Issued, ok = next(); !ok {
		return Cursor{}, errForged()
	}
	for i := range c.Seqs {
		if c.Seqs[i], ok = next(); !ok {
			return Cursor{}, errForged()
		}
	}
	if len(rest) != 0 {
		return Cursor{}, errForged()
	}
	return c, nil
}

// Page is one answer of the feed.
type Page struct {
	Changes []Change // the changes the selector picked
	Cursor  string   // the cursor to follow from next

	from Cursor
	read []Change // every change read, picked or not, in the feed's order
	sel  machine.Selector
	key  []byte
}

// After returns the cursor that follows the first n changes of the page,
// for an answer that holds only those: past the changes read before the
// next one picked.
func (p Page) After(n int) string {
	c := p.from
	picked := 0
	for _, ch := range p.read {
		if ch.Picked(p.sel) {
			if picked == n {
				break
			}
			picked++
		}
		c.Seqs[ch.Shard] = ch.Seq
	}
	return c.encode(p.key)
}

// feedKey returns the cursors' key, read from the store once.
func (p *Protocol) feedKey(ctx context.Context) ([]byte, error) {
	p.keyMu.Lock()
	defer p.keyMu.Unlock()
	if p.key != nil {
		return p.key, nil
	}
	key, err := p.store.FeedKey(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the feed's key: %w", err)
	}
	p.key = key
	return key, nil
}

// head is the cursor of the feed as it is now.
func (p *Protocol) head(ctx context.Context) (Cursor, error) {
	heads, err := p.store.Heads(ctx)
	if err != nil {
		return Cursor{}, err
	}
	return Cursor{Issued: p.now().UnixMilli(), Seqs: heads.Seqs}, nil
}

// Changes answers the feed after the cursor since: the changes committed
// after it that sel picks (Change.Picked), oldest first (by time across
// shards, by position within one, so never reordering one slave's
// changes), at most FeedPage, and the cursor to follow from next, past the
// changes sel did not pick too: an answer with no change is a bookmark, so
// a follower whose selector rarely matches never falls out of the
// retention. An empty since follows from now. With wait above 0 it holds
// the request until a change sel picks exists or wait passes (or ctx is
// about to end), reading the feed every FeedPoll. It returns fault.Invalid
// for a cursor it did not issue and fault.Gone for one older than
// FeedRetention.
func (p *Protocol) Changes(ctx context.Context, since string, wait time.Duration, sel machine.Selector) (Page, error) {
	key, err := p.feedKey(ctx)
	if err != nil {
		return Page{}, err
	}
	var from Cursor
	if since == "" {
		if from, err = p.head(ctx); err != nil {
			return Page{}, err
		}
	} else {
		if from, err = decodeCursor(since, key); err != nil {
			return Page{}, err
		}
		if age := p.now().UnixMilli() - from.Issued; age > FeedRetention.Milliseconds() {
			return Page{}, fault.Gone("cursor expired; list again")
		}
	}
	until := p.now().Add(wait)
	if d, ok := ctx.Deadline(); ok && d.Add(-time.Second).Before(until) {
		until = d.Add(-time.Second) // answer before the route's timeout cuts the request
	}
	for {
		read, next, err := p.read(ctx, from, Cursor{}, FeedPage)
		if err != nil {
			return Page{}, err
		}
		var picked []Change
		for _, c := range read {
			if c.Picked(sel) {
				picked = append(picked, c)
			}
		}
		if len(picked) > 0 || !p.now().Add(FeedPoll).Before(until) {
			from.Issued = next.Issued
			return Page{Changes: picked, Cursor: next.encode(key), from: from, read: read, sel: sel, key: key}, nil
		}
		from.Seqs = next.Seqs // past the changes sel did not pick
		if len(read) == FeedPage {
			continue // more may follow at once
		}
		t := time.NewTimer(FeedPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return Page{}, fmt.Errorf("wait for changes: %w", ctx.Err())
		case <-t.C:
		}
	}
}

// read returns the changes after from, up to the positions of upTo where
// they are not zero (up to the heads where upTo is the zero Cursor), oldest
// first, at most max, and the cursor past them, issued now.
//
// Within a shard it answers only the entries that follow from one another
// without a gap. A position is taken only by a committed change, so a gap
// is a change whose write is still becoming visible to the reader (a
// transaction's items appear one by one to a Query): it stops before the
// gap and answers the change on a later read, never skipping it.
func (p *Protocol) read(ctx context.Context, from, upTo Cursor, max int) ([]Change, Cursor, error) {
	heads := upTo.Seqs
	if upTo == (Cursor{}) {
		h, err := p.store.Heads(ctx)
		if err != nil {
			return nil, Cursor{}, err
		}
		heads = h.Seqs
	}
	var shards [FeedShards][]Change
	var g errgroup.Group
	for s := range FeedShards {
		if heads[s] <= from.Seqs[s] {
			continue
		}
		g.Go(func() error {
			entries, err := p.store.Entries(ctx, s, from.Seqs[s], min(max, int(heads[s]-from.Seqs[s])))
			if err != nil {
				return err
			}
			want := from.Seqs[s] + 1
			for i, e := range entries {
				if e.Seq != want+int64(i) || e.Seq > heads[s] {
					entries = entries[:i]
					break
				}
			}
			shards[s] = entries
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, Cursor{}, err
	}
	next := Cursor{Issued: p.now().UnixMilli(), Seqs: from.Seqs}
	changes := merge(shards, max)
	for _, c := range changes {
		next.Seqs[c.Shard] = c.Seq
	}
	return changes, next, nil
}

// merge takes up to max changes from the shards' lists, oldest first by
// time, each shard's in its own order: a prefix of each.
func merge(shards [FeedShards][]Change, max int) []Change {
	var out []Change
	var at [FeedShards]int
	for len(out) < max {
		best := -1
		for s := range FeedShards {
			if at[s] == len(shards[s]) {
				continue
			}
			if best < 0 || shards[s][at[s]].At < shards[best][at[best]].At {
				best = s
			}
		}
		if best < 0 {
			break
		}
		out = append(out, shards[best][at[best]])
		at[best]++
	}
	return out
}

// Listed answers a list with the cursor of the state it answered. list
// reads the list (with any eventually consistent read it likes); Listed
// reads the feed's position before and after it, and returns the cursor of
// the state after, with the slaves whose state the list may have read
// otherwise: each slave changed from ListSettle before the list began to the
// cursor, as its last change left it (nil when deleted). A list corrected
// with them is the state at the cursor, so a client that follows the feed
// from it misses nothing and sees nothing twice (docs/decisions.md).
func (p *Protocol) Listed(ctx context.Context, list func(context.Context) error) (map[string]*machine.Slave, string, error) {
	key, err := p.feedKey(ctx)
	if err != nil {
		return nil, "", err
	}
	heads, err := p.store.Heads(ctx)
	if err != nil {
		return nil, "", err
	}
	before := Cursor{Issued: p.now().UnixMilli(), Seqs: heads.Seqs}
	settled := p.now().Add(-ListSettle).UnixMilli()
	var g errgroup.Group
	for s := range FeedShards {
		// A shard whose newest entry settled before the list is read
		// whole by it: no walk back (in a quiet fleet, most of them).
		if w := heads.Written[s]; heads.Seqs[s] == 0 || w != 0 && w < settled {
			continue
		}
		g.Go(func() error { // each its own shard's position
			at, err := p.store.Before(ctx, s, before.Seqs[s], settled)
			before.Seqs[s] = at
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, "", err
	}
	if err := list(ctx); err != nil {
		return nil, "", err
	}
	after, err := p.head(ctx)
	if err != nil {
		return nil, "", err
	}
	fix := map[string]*machine.Slave{}
	latest := map[string]int64{}
	for from, attempt := before, 0; from.Seqs != after.Seqs; {
		changes, next, err := p.read(ctx, from, after, FeedPage)
		if err != nil {
			return nil, "", err
		}
		if len(changes) == 0 {
			// Every position up to after is committed: a gap is a write
			// still becoming visible, which takes milliseconds.
			if attempt++; attempt == Attempts {
				return nil, "", fault.Unavailable("the change feed is not readable yet, try again")
			}
			if err := Wait(ctx, attempt); err != nil {
				return nil, "", err
			}
			continue
		}
		for _, c := range changes {
			if c.Seq > latest[c.SlaveID] {
				latest[c.SlaveID], fix[c.SlaveID] = c.Seq, c.Slave
			}
		}
		from = next
	}
	return fix, after.encode(key), nil
}

// feedChanges are the feed entries of a decided write, at the positions
// after the shard's head as read: the slave's change (none for an expiring
// record alone), then its expiring record's, set, deleted or applied. An
// expiring record of a slave that is gone is the slave's deletion's
// business: none.
func (p *Protocol) feedChanges(id string, read Read, plan *machine.Plan) []Change {
	written := p.now().UnixMilli()
	var out []Change
	add := func(c Change) {
		c.SlaveID, c.Shard, c.Seq, c.Written = id, ShardOf(id), read.Head+int64(len(out))+1, written
		out = append(out, c)
	}
	prev := read.Snapshot.Slave
	var after *machine.Slave
	switch plan.Kind {
	case machine.DropsExpiring:
		if prev == nil {
			return nil
		}
		after = new(cloneSlave(*prev))
	case machine.Describes:
		after = new(cloneSlave(*prev))
		describeFrom(after, plan.Slave)
		add(Change{Kind: DescriptionChanged, At: plan.Slave.DescribedAt, Slave: after, Before: new(cloneSlave(*prev))})
	case machine.Creates:
		after = new(cloneSlave(plan.Slave))
		after.ID, after.Current.SlaveID = id, id
		entry := *plan.Entry
		entry.SlaveID = id
		add(Change{Kind: Added, At: entry.Timestamp, Entry: &entry, Slave: after})
	case machine.Imports:
		// A slave replaced is deleted and added again: its history is not
		// the one a follower saw grow.
		if prev != nil {
			add(Change{Kind: Deleted, At: written, Before: new(cloneSlave(*prev))})
		}
		after = new(cloneSlave(plan.Slave))
		after.ID, after.Current.SlaveID = id, id
		entry := *plan.Entry
		entry.SlaveID = id
		add(Change{Kind: Added, At: entry.Timestamp, Entry: &entry, Slave: after})
		if e := plan.PutExpiring; e != nil {
			add(Change{Kind: ExpiringSet, At: e.StartMillis, Expiring: e, Slave: after})
		}
		return out // the record replaced goes with the slave's deletion
	case machine.Transitions:
		after = new(cloneSlave(*prev))
		var before *machine.Slave
		if plan.Describe {
			describeFrom(after, plan.Slave)
			before = new(cloneSlave(*prev))
		} else if !plan.Slave.Current.State.Draining() {
			after.RunningTasks = nil // leaving the draining states clears the count
		}
		entry := *plan.Entry
		entry.SlaveID = id
		after.Current = entry
		add(Change{Kind: StateChanged, At: entry.Timestamp, Entry: &entry, Previous: prev.Current.State, Slave: after, Before: before})
	}
	if plan.DropExpiring && read.Snapshot.Expiring != nil {
		c := Change{Kind: ExpiringDeleted, At: written, Expiring: read.Snapshot.Expiring, Slave: after}
		if plan.Reverts {
			c.Kind, c.At = ExpiringReverted, plan.Entry.Timestamp
		}
		add(c)
	}
	if e := plan.PutExpiring; e != nil {
		add(Change{Kind: ExpiringSet, At: e.StartMillis, Expiring: e, Slave: after})
	}
	return out
}

// describeFrom copies a report's description from src into dst.
func describeFrom(dst *machine.Slave, src machine.Slave) {
	s := cloneSlave(src)
	dst.Host, dst.RackID, dst.DescribedAt = s.Host, s.RackID, s.DescribedAt
	dst.Attributes, dst.Resources, dst.RunningTasks = s.Attributes, s.Resources, s.RunningTasks
}

// cloneSlave returns s sharing nothing with the slave it was copied from.
func cloneSlave(s machine.Slave) machine.Slave {
	attrs := make(map[string]string, len(s.Attributes))
	for k, v := range s.Attributes {
		attrs[k] = v
	}
	s.Attributes = attrs
	if len(s.Resources) == 0 {
		s.Resources = nil
	} else {
		s.Resources = slices.Clone(s.Resources)
	}
	if s.RunningTasks != nil {
		s.RunningTasks = new(*s.RunningTasks)
	}
	return s
}
