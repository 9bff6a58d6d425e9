package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/fleetops/fleet/client"
)

// feedWait is how long one read of the change feed waits for a change,
// the most the service holds a request.
const feedWait = 20 * time.Second

// feedClient returns a client for the change feed: a read of it is held up
// to feedWait, so each attempt has that on top of the usual time.
func (a *app) feedClient(ctx context.Context) (*client.Client, error) {
	s := a.settings
	return a.clientWith(ctx, client.Options{AttemptTimeout: feedWait + s.timeout/2, CallTimeout: feedWait + s.timeout, OnRetry: a.retrying})
}

// followPace is the least time between two reads of the feed by a wait:
// the service answers as soon as any machine of the fleet changed, so a
// busy fleet would otherwise be read back to back; paced, each answer holds
// up to a second of the fleet's changes, and a drain's steps are still seen
// sooner than the 2 s polling saw them.
const followPace = time.Second

// followFeed reads the change feed from cursor, each read held up to
// feedWait and started at least pace after the previous one, and hands
// each answer to apply, until ctx ends (with its cause) or a read fails. A
// 410, a cursor older than the feed's retention, is said in one line on
// stderr, again saying what is done about it; reread then reads the state
// again and gives the cursor to go on from. It returns the cursor after
// the last answer applied.
func (a *app) followFeed(ctx context.Context, c *client.Client, cursor string, sel client.Selector, pace time.Duration, again string, reread func(context.Context) (string, error), apply func(*client.Changes, []json.RawMessage)) (string, error) {
	var last time.Time
	for {
		if d := pace - time.Since(last); d > 0 {
			select {
			case <-ctx.Done():
				return cursor, context.Cause(ctx)
			case <-time.After(d):
			}
		}
		last = time.Now()
		page, raw, err := c.FollowSelectedRaw(ctx, cursor, feedWait, sel)
		if ctx.Err() != nil {
			return cursor, context.Cause(ctx)
		}
		if client.StatusOf(err) == http.StatusGone {
			fmt.Fprintf(a.stderr, "fleetctl: %s: the feed no longer holds its changes; %s\n", message(err), again)
			if cursor, err = reread(ctx); err != nil {
				return "", err
			}
			continue
		}
		if err != nil {
			return cursor, err
		}
		apply(page, raw)
		cursor = page.Cursor
	}
}

// errNoFeed is a service without the change feed (a deployment older than
// it): its waits read each machine every --poll, as they did before it.
var errNoFeed = errors.New("the service has no change feed")

// stateFollower keeps the state of the machines one fleetctl process waits
// for and hands each machine's new states to its waits. It takes a cursor
// first, then reads the state (a list, or one machine's details), so no
// change between the read and the follow is missed; then it follows the
// feed. However many machines are waited for, that is one read and then
// one feed request per change batch or per feedWait, at most one per
// followPace, not a read of every machine every --poll (docs/behaviour.md
// "The change feed").
type stateFollower struct {
	a    *app
	c    *client.Client // reads the state, and polls without a feed
	fc   *client.Client // follows the feed
	ids  []string
	poll time.Duration

	read    chan struct{} // closed once the state is read, or the follower ended
	ended   chan struct{} // closed when the follower stops; err says why
	err     error
	mu      sync.Mutex
	known   map[string]*client.Slave // each machine's state; nil: none such, or deleted
	waiters map[string][]*stateWaiter
}

// stateWaiter is one wait's queue of its machine's states, oldest first;
// nil is the machine deleted.
type stateWaiter struct {
	mu     sync.Mutex
	states []*client.Slave
	ready  chan struct{} // holds a token while states is not empty
}

func (w *stateWaiter) push(s *client.Slave) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.states = append(w.states, s)
	select {
	case w.ready <- struct{}{}:
	default:
	}
}

func (w *stateWaiter) take() []*client.Slave {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.states
	w.states = nil
	return s
}

// followStates starts following the machines ids until ctx ends. listed
// and cursor are a list that holds them and its X-Changes-Cursor, when the
// caller has read one; without a cursor the follower reads the state
// itself. A wait that starts before the state is read waits for it.
func (a *app) followStates(ctx context.Context, c *client.Client, ids []string, poll time.Duration, listed []client.Slave, cursor string) (*stateFollower, error) {
	fc, err := a.feedClient(ctx)
	if err != nil {
		return nil, err
	}
	f := &stateFollower{a: a, c: c, fc: fc, ids: ids, poll: poll, read: make(chan struct{}), ended: make(chan struct{}),
		known: map[string]*client.Slave{}, waiters: map[string][]*stateWaiter{}}
	go func() {
		f.stop(f.run(ctx, listed, cursor))
	}()
	return f, nil
}

// run reads the state, unless listed holds it at cursor, and follows the
// feed from there.
func (f *stateFollower) run(ctx context.Context, listed []client.Slave, cursor string) error {
	if cursor == "" {
		var err error
		if cursor, listed, err = f.readState(ctx); err != nil {
			return err
		}
	}
	f.mu.Lock()
	f.set(listed)
	f.mu.Unlock()
	close(f.read)
	// The service sends only the changes of the machines waited for, when
	// they are few enough to name in a URL.
	var sel client.Selector
	if len(f.ids) <= maxNamedIDs {
		sel.IDs = f.ids
	}
	_, err := f.a.followFeed(ctx, f.fc, cursor, sel, followPace, "reading the machines' state again and following from there", f.reread, f.apply)
	return err
}

// readState takes a cursor, then reads the machines' state: so every change
// after the read is after the cursor too. A list answers its own cursor,
// exact; a machine's details do not, and the feed's "now" is taken before
// them (a change in between is then seen again, and passed over by apply).
func (f *stateFollower) readState(ctx context.Context) (string, []client.Slave, error) {
	if len(f.ids) != 1 {
		all, cursor, err := f.c.ListSlavesAt(ctx, "")
		if err != nil {
			return "", nil, err
		}
		if cursor != "" {
			return cursor, all, nil
		}
	}
	now, err := f.fc.FollowChanges(ctx, "", 0)
	if client.IsNotFound(err) {
		return "", nil, errNoFeed
	}
	if err != nil {
		return "", nil, err
	}
	if len(f.ids) != 1 {
		all, _, err := f.c.ListSlavesAt(ctx, "")
		return now.Cursor, all, err
	}
	s, err := f.c.GetSlave(ctx, f.ids[0])
	if client.IsNotFound(err) {
		return now.Cursor, nil, nil
	}
	if err != nil {
		return "", nil, err
	}
	return now.Cursor, []client.Slave{*s}, nil
}

// set makes listed the known state of the machines followed, those not in
// it none such. f.mu is held.
func (f *stateFollower) set(listed []client.Slave) {
	byID := make(map[string]*client.Slave, len(listed))
	for i := range listed {
		if listed[i].CurrentState.State != "" { // a machine named by id that the list did not hold
			byID[listed[i].ID] = &listed[i]
		}
	}
	for _, id := range f.ids {
		f.known[id] = byID[id]
	}
}

// reread reads the state again after a 410 and hands it to every wait.
func (f *stateFollower) reread(ctx context.Context) (string, error) {
	cursor, listed, err := f.readState(ctx)
	if err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.set(listed)
	for id, ws := range f.waiters {
		for _, w := range ws {
			w.push(f.known[id])
		}
	}
	return cursor, nil
}

// apply hands each change of a machine followed to its waits.
func (f *stateFollower) apply(page *client.Changes, _ []json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ch := range page.Changes {
		old, followed := f.known[ch.SlaveID]
		if !followed {
			continue
		}
		// A change from before a read of details comes again: a slave's
		// history never goes back in time, so a state older than the one
		// read is such a change.
		if old != nil && ch.Slave != nil && ch.Slave.CurrentState.Timestamp < old.CurrentState.Timestamp {
			continue
		}
		f.known[ch.SlaveID] = ch.Slave
		for _, w := range f.waiters[ch.SlaveID] {
			w.push(ch.Slave)
		}
	}
}

// stop ends the follower: the waits still running poll instead when the
// service has no feed, and end with err otherwise.
func (f *stateFollower) stop(err error) {
	if client.IsNotFound(err) {
		err = errNoFeed
	}
	if errors.Is(err, errNoFeed) {
		fmt.Fprintf(f.a.stderr, "fleetctl: the service has no change feed (404 on /api/slaves/changes); reading each machine every %s instead\n", f.poll)
	}
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
	close(f.ended)
	select {
	case <-f.read:
	default:
		close(f.read)
	}
}

// add registers a wait for id: the state known now, and from then on every
// state the feed gives.
func (f *stateFollower) add(id string) (*stateWaiter, *client.Slave) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := &stateWaiter{ready: make(chan struct{}, 1)}
	f.waiters[id] = append(f.waiters[id], w)
	return w, f.known[id]
}

func (f *stateFollower) remove(id string, w *stateWaiter) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ws := f.waiters[id]
	for i := range ws {
		if ws[i] == w {
			f.waiters[id] = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(f.waiters[id]) == 0 {
		delete(f.waiters, id)
	}
}

// ending is why the follower stopped.
func (f *stateFollower) ending() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// waitFor waits until machine id is in target, deciding on each state the
// follower gives as pollFor does (see reached). start, when not
// nil, is run once the wait is registered (a drain's decommission), and
// the states from before it are passed over: the first one draining or
// done is the decommission's own or later, and so is a deletion.
func (f *stateFollower) waitFor(ctx context.Context, id string, target client.State, p *progress, start func(context.Context) error) error {
	select {
	case <-f.read:
	case <-ctx.Done():
		return waitEnded(ctx, id, target, p)
	}
	w, cur := f.add(id)
	defer f.remove(id, w)
	defer p.gone(id)
	states := []*client.Slave{cur}
	if start != nil {
		if err := start(ctx); err != nil {
			return err
		}
		// The state known is from before the start, and the feed brings
		// the change it made: a machine the list did not hold yet is no
		// machine "never seen".
		states = nil
	}
	passing := start != nil
	for {
		if err := f.ending(); err != nil {
			// The service has no feed: poll as before. Otherwise the
			// follower failed (or ctx ended), and so does the wait.
			if errors.Is(err, errNoFeed) {
				return pollFor(ctx, f.c, id, target, f.poll, p)
			}
			if ctx.Err() != nil {
				return waitEnded(ctx, id, target, p)
			}
			return err
		}
		for _, s := range states {
			if passing && s != nil && !draining(s.CurrentState.State) && s.CurrentState.State != client.Decommissioned {
				continue
			}
			passing = false
			if done, err := reached(id, s, target, p); done {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return waitEnded(ctx, id, target, p)
		case <-w.ready:
			states = w.take()
		case <-f.ended:
			states = w.take()
		}
	}
}
