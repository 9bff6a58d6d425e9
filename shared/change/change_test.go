package change_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/change"
	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/machine"
)

// racing is a store on which every write loses a race, after calling
// onWrite with the number of writes so far.
type racing struct {
	read       change.Read
	writes     []change.Write
	remembered []change.Receipt
	onWrite    func(n int)
}

func (s *racing) Read(context.Context, string, *change.Receipt) (change.Read, error) {
	return s.read, nil
}

func (s *racing) Write(_ context.Context, w change.Write) error {
	s.writes = append(s.writes, w)
	if s.onWrite != nil {
		s.onWrite(len(s.writes))
	}
	return change.ErrRace
}

func (s *racing) Create(_ context.Context, ws []change.Write) error {
	s.writes = append(s.writes, ws...)
	return change.ErrRace
}

func (s *racing) Remember(_ context.Context, r change.Receipt) error {
	s.remembered = append(s.remembered, r)
	return nil
}

func (s *racing) Remove(context.Context, string, int64, bool, change.Change) error {
	return change.ErrRace
}
func (s *racing) Heads(context.Context) (change.Heads, error) {
	return change.Heads{}, nil
}
func (s *racing) Entries(context.Context, int, int64, int) ([]change.Change, error) { return nil, nil }
func (s *racing) Before(_ context.Context, _ int, head, _ int64) (int64, error)     { return head, nil }
func (s *racing) FeedKey(context.Context) ([]byte, error)                           { return []byte("key"), nil }
func (s *racing) ListByState(context.Context, machine.State, func(machine.Slave) error) error {
	return nil
}
func (s *racing) History(context.Context, string, time.Time, int) ([]machine.Update, error) {
	if s.read.Snapshot.Slave == nil {
		return nil, nil
	}
	return []machine.Update{s.read.Snapshot.Slave.Current}, nil
}

func active(at int64) change.Read {
	slave := machine.Slave{ID: "S1", Current: machine.Update{SlaveID: "S1", State: machine.Active, Timestamp: at}}
	return change.Read{Snapshot: machine.Snapshot{Slave: &slave}, Version: 1}
}

func freeze(at int64) machine.Decide {
	return machine.UserChange(machine.Change{SlaveID: "S1", Target: machine.Frozen, Now: func() int64 { return at }}, machine.Limits{})
}

func TestAChangeThatKeepsLosingRacesStopsAfterItsLastAttemptWithoutWaiting(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The context ends during the last attempt: a wait after it would
	// answer with the context's end instead of the lost races.
	s := &racing{read: active(1000), onWrite: func(n int) {
		if n == change.Attempts {
			cancel()
		}
	}}
	err := change.New(s, 0).Apply(ctx, "S1", freeze(2000))
	if len(s.writes) != change.Attempts || fault.KindOf(err) != fault.KindUnavailable {
		t.Errorf("got %d writes and %v, want %d and fault.Unavailable", len(s.writes), err, change.Attempts)
	}
}

func TestAChangeStopsWaitingToRetryWhenItsContextEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	s := &racing{read: active(1000), onWrite: func(int) { cancel() }}
	err := change.New(s, 0).Apply(ctx, "S1", freeze(2000))
	if len(s.writes) != 1 || !errors.Is(err, context.Canceled) {
		t.Errorf("got %d writes and %v, want 1 and context.Canceled", len(s.writes), err)
	}
}

// The decision names the decommissioning set's join or leave and times
// the entry after the set's last change; the protocol adds the retention
// of the entry the change supersedes.
func TestTheDecisionNamesTheDecommissioningSetAndTheProtocolAddsRetention(t *testing.T) {
	tests := []struct {
		name        string
		from        machine.State
		target      machine.State
		join, leave bool
	}{
		{"entering a decommissioning state joins the set", machine.Active, machine.StartingDecommission, true, false},
		{"leaving it leaves the set", machine.StartingDecommission, machine.Active, false, true},
		{"a change outside it touches no set", machine.Active, machine.Frozen, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			read := active(1000)
			read.Snapshot.Slave.Current.State = tt.from
			read.Snapshot.LimitAt = 5000 // a change on a clock a little behind follows it
			ctx, cancel := context.WithCancel(context.Background())
			s := &racing{read: read, onWrite: func(int) { cancel() }}
			c := machine.Change{SlaveID: "S1", Target: tt.target, Now: func() int64 { return 2000 }}
			_ = change.New(s, time.Hour).Apply(ctx, "S1", machine.UserChange(c, machine.Limits{}))
			if len(s.writes) != 1 {
				t.Fatalf("got %d writes, want 1", len(s.writes))
			}
			w := s.writes[0]
			wantAt := int64(2000)
			if tt.join || tt.leave {
				wantAt = 5001
			}
			if w.Plan.Join != tt.join || w.Plan.Leave != tt.leave || w.Plan.Entry.Timestamp != wantAt || w.Plan.Slave.Current.Timestamp != wantAt {
				t.Errorf("got join %v, leave %v, entry at %d, current at %d; want %v, %v, %d, %d",
					w.Plan.Join, w.Plan.Leave, w.Plan.Entry.Timestamp, w.Plan.Slave.Current.Timestamp, tt.join, tt.leave, wantAt, wantAt)
			}
			if want := (wantAt + time.Hour.Milliseconds()) / 1000; w.Supersedes != want {
				t.Errorf("got the superseded entry expiring at %d, want %d", w.Supersedes, want)
			}
		})
	}
}

// A store only carries out the kind of write a plan names: a plan that
// names none is an error, and nothing is written.
func TestAPlanThatNamesNoKindOfWriteIsNotWritten(t *testing.T) {
	s := &racing{read: active(1000)}
	err := change.New(s, 0).Apply(context.Background(), "S1", func(snap machine.Snapshot) (*machine.Plan, error) {
		return &machine.Plan{Slave: *snap.Slave, Describe: true}, nil
	})
	if err == nil || len(s.writes) != 0 {
		t.Errorf("got %v and %d writes, want an error and none", err, len(s.writes))
	}
}

// A dry run is the change's decision on what the store reads, and nothing
// else: no write, no receipt, one decision when the read does not collide.
func TestADryRunDecidesOnWhatItReadsAndWritesNothing(t *testing.T) {
	frozen := active(1000)
	frozen.Snapshot.Slave.Current.State = machine.Frozen
	tests := []struct {
		name    string
		read    change.Read
		applies bool
		refusal fault.Kind
	}{
		{"a change that would be applied", active(1000), true, 0},
		{"a change the decision refuses", frozen, false, fault.KindConflict},
		{"a change of an unknown slave", change.Read{}, false, fault.KindNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &racing{read: tt.read}
			decisions := 0
			err := change.New(s, time.Hour).DryRun(t.Context(), "S1", func(snap machine.Snapshot) (*machine.Plan, error) {
				decisions++
				return freeze(2000)(snap)
			})
			switch {
			case tt.applies && err != nil:
				t.Errorf("got %v, want nil", err)
			case !tt.applies && (err == nil || fault.KindOf(err) != tt.refusal):
				t.Errorf("got %v, want a refusal of kind %v", err, tt.refusal)
			}
			if decisions != 1 || len(s.writes) != 0 || len(s.remembered) != 0 {
				t.Errorf("got %d decisions, %d writes and %d receipts, want 1, 0 and 0", decisions, len(s.writes), len(s.remembered))
			}
		})
	}
}

// losesOnce is a store whose first batch of creates loses its race, and
// whose reads are counted.
type losesOnce struct {
	racing
	creates, reads int
}

func (s *losesOnce) Create(context.Context, []change.Write) error {
	if s.creates++; s.creates == 1 {
		return change.ErrRace
	}
	return nil
}

func (s *losesOnce) Read(context.Context, string, *change.Receipt) (change.Read, error) {
	s.reads++
	return change.Read{}, nil
}

func TestABatchOfCreatesThatLosesARaceIsWrittenAgainNotOneByOne(t *testing.T) {
	s := &losesOnce{}
	report := func(id string) machine.Decide {
		return machine.Observe(machine.Observation{ID: id, Host: id + ".example.com", At: 1000}, 1000)
	}
	errs := change.New(s, 0).ApplyAbsent(t.Context(), []string{"N1", "N2", "N3"}, report)
	if err := errors.Join(errs...); err != nil || s.creates != 2 || s.reads != 0 {
		t.Errorf("got %d writes of the batch, %d reads and %v, want 2 writes, no read and no error", s.creates, s.reads, err)
	}
}
