package change_test

import (
	"context"
	"testing"

	"github.com/fleetops/fleet/shared/change"
	"github.com/fleetops/fleet/shared/machine"
)

// visible is a feed whose shard 0 holds entries 1 to head, of which a
// reader sees only those in shown: a transaction's entries that a Query
// sees one by one.
type visible struct {
	racing
	head  int64
	shown map[int64]bool
}

func (v *visible) Heads(context.Context) (change.Heads, error) {
	return change.Heads{Seqs: [change.FeedShards]int64{v.head}}, nil
}

func (v *visible) Entries(_ context.Context, shard int, after int64, max int) ([]change.Change, error) {
	var out []change.Change
	for seq := after + 1; shard == 0 && seq <= v.head && len(out) < max; seq++ {
		if v.shown[seq] {
			out = append(out, change.Change{SlaveID: "S1", Kind: change.StateChanged, Shard: 0, Seq: seq, At: seq})
		}
	}
	return out, nil
}

func TestTheFeedStopsAtAnEntryNotYetVisibleAndAnswersItLater(t *testing.T) {
	ctx := t.Context()
	feed := &visible{head: 0, shown: map[int64]bool{}}
	p := change.New(feed, 0)
	first, err := p.Changes(ctx, "", 0, machine.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	// Positions 1 to 3 are committed, but 2 is not visible yet.
	feed.head, feed.shown = 3, map[int64]bool{1: true, 3: true}
	page, err := p.Changes(ctx, first.Cursor, 0, machine.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Changes) != 1 || page.Changes[0].Seq != 1 {
		t.Fatalf("got %+v, want position 1 alone: the reader must stop before the gap", page.Changes)
	}
	feed.shown[2] = true
	rest, err := p.Changes(ctx, page.Cursor, 0, machine.Selector{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rest.Changes) != 2 || rest.Changes[0].Seq != 2 || rest.Changes[1].Seq != 3 {
		t.Errorf("got %+v, want positions 2 and 3", rest.Changes)
	}
}
