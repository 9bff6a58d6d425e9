package memstore

import (
	"context"
	"crypto/rand"

	"github.com/fleetops/fleet/shared/change"
)

// feed is the change feed in memory: each shard's entries, oldest first,
// the entry at position n at index n-1. Entries are never collected: the
// store lives for a test.
type feed struct {
	shards [change.FeedShards][]change.Change
	key    []byte
}

func newFeed() feed {
	key := make([]byte, 32)
	rand.Read(key)
	return feed{key: key}
}

// head is the newest position of shard. s.mu is held.
func (s *Store) head(shard int) int64 { return int64(len(s.feed.shards[shard])) }

// headIs reports whether cs, changes decided on a read of their shard's
// head, would take the positions right after the head as it is now:
// nothing else took them since. No change takes none. s.mu is held.
func (s *Store) headIs(cs []change.Change) bool {
	return len(cs) == 0 || cs[0].Seq == s.head(cs[0].Shard)+1
}

// appendChanges writes cs at their positions, which headIs checked, each
// slave at its change's sequence. s.mu is held.
func (s *Store) appendChanges(cs []change.Change) {
	for _, c := range cs {
		c = cloneChange(c)
		if c.Slave != nil {
			c.Slave.Sequence = c.Seq
		}
		s.feed.shards[c.Shard] = append(s.feed.shards[c.Shard], c)
	}
}

// Heads returns every shard's newest position, and when its entry was
// written.
func (d *driver) Heads(ctx context.Context) (change.Heads, error) {
	var heads change.Heads
	if err := ctx.Err(); err != nil {
		return heads, err
	}
	s := (*Store)(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, entries := range s.feed.shards {
		heads.Seqs[i] = s.head(i)
		if len(entries) > 0 {
			heads.Written[i] = entries[len(entries)-1].Written
		}
	}
	return heads, nil
}

// Entries returns shard's entries after position after, at most max.
func (d *driver) Entries(ctx context.Context, shard int, after int64, max int) ([]change.Change, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s := (*Store)(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.feed.shards[shard]
	var out []change.Change
	for i := after; i < int64(len(all)) && len(out) < max; i++ {
		out = append(out, cloneChange(all[i]))
	}
	return out, nil
}

// Before walks shard back from head to the first entry written before at.
func (d *driver) Before(ctx context.Context, shard int, head, at int64) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s := (*Store)(d)
	s.mu.Lock()
	defer s.mu.Unlock()
	all := s.feed.shards[shard]
	pos := min(head, int64(len(all)))
	for pos > 0 && all[pos-1].Written >= at {
		pos--
	}
	return pos, nil
}

// FeedKey returns the store's random cursor key.
func (d *driver) FeedKey(ctx context.Context) ([]byte, error) { return d.feed.key, ctx.Err() }

func cloneChange(c change.Change) change.Change {
	if c.Entry != nil {
		c.Entry = new(*c.Entry)
	}
	if c.Slave != nil {
		c.Slave = new(cloneSlave(*c.Slave))
	}
	if c.Before != nil {
		c.Before = new(cloneSlave(*c.Before))
	}
	if c.Expiring != nil {
		c.Expiring = new(cloneExpiring(*c.Expiring))
	}
	return c
}
