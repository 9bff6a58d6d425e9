//go:build integration

package inventory_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/change"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/inventory"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/reportstore"
)

var (
	local *stack.Local
	quiet = slog.New(slog.NewTextHandler(io.Discard, nil))
)

// TestMain starts a moto_server of its own with the template's tables and
// buckets, so the suite never depends on something already running.
func TestMain(m *testing.M) {
	os.Exit(stack.Main(func(l *stack.Local) int {
		local = l
		return m.Run()
	}))
}

// emptyFleet recreates the tables, so that a complete report of one test
// does not find another's machines absent, and returns a store over them
// and a handler reading the local reports bucket.
func emptyFleet(t *testing.T) (*dynamo.Store, *inventory.Handler) {
	t.Helper()
	return emptyFleetOn(t, local.DynamoDB)
}

// emptyFleetOn is emptyFleet with the store and handler calling db.
func emptyFleetOn(t *testing.T, db dynamo.API) (*dynamo.Store, *inventory.Handler) {
	t.Helper()
	if err := local.Template.RecreateTables(t.Context(), local.DynamoDB, stack.LocalName); err != nil {
		t.Fatal(err)
	}
	store := dynamo.New(db, stack.Tables, 0)
	h := inventory.New(store, machine.DefaultLossBrake, quiet, nil).ReadsFrom(local.ReportsBucket, reportstore.New(local.S3))
	return store, h
}

// objectEvent is S3's "Object Created" event for key in bucket, at time.
func objectEvent(at time.Time, bucket, key string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"version":"0","detail-type":"Object Created","source":"aws.s3","time":%q,
		"detail":{"version":"0","bucket":{"name":%q},"object":{"key":%q,"size":1},"reason":"PutObject"}}`,
		at.UTC().Format(time.RFC3339), bucket, key))
}

// upload writes body to the reports bucket under key, gzip-compressed when
// zip is set.
func upload(t *testing.T, key string, body []byte, zip bool) {
	t.Helper()
	if zip {
		var buf bytes.Buffer
		z := gzip.NewWriter(&buf)
		z.Write(body)
		z.Close()
		body = buf.Bytes()
	}
	_, err := local.S3.PutObject(t.Context(), &s3.PutObjectInput{Bucket: aws.String(local.ReportsBucket), Key: aws.String(key), Body: bytes.NewReader(body)})
	if err != nil {
		t.Fatal(err)
	}
}

// reportBody is a report of machines in the JSON form, or the JSON Lines
// form when lines is set.
func reportBody(complete bool, machines []string, lines bool) []byte {
	if lines {
		return []byte(fmt.Sprintf("{\"complete\":%v}\n%s\n", complete, strings.Join(machines, "\n")))
	}
	return []byte(fmt.Sprintf(`{"machines":[%s],"complete":%v}`, strings.Join(machines, ","), complete))
}

func up(ids ...string) []string {
	var out []string
	for _, id := range ids {
		out = append(out, fmt.Sprintf(`{"id":%q,"host":"%s.example.com","rackId":"r1","resources":{"cpus":4},"runningTasks":1}`, id, id))
	}
	return out
}

func ids(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s%03d", prefix, i))
	}
	return out
}

// states reads every slave's state.
func states(t *testing.T, store *dynamo.Store) map[string]machine.State {
	t.Helper()
	out := map[string]machine.State{}
	err := store.List(t.Context(), func(s machine.Slave) error {
		out[s.ID] = s.Current.State
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestAReportThroughTheBucketAppliesAsTheInlineOneDoes(t *testing.T) {
	fleet := ids("M", 20)
	for _, tc := range []struct {
		name      string
		key       string
		lines, gz bool
	}{
		{"JSON", "reports/plain.json", false, false},
		{"JSON, gzip", "reports/fleet.json.gz", false, true},
		{"JSON Lines", "reports/fleet.jsonl", true, false},
		{"JSON Lines, gzip", "reports/fleet.jsonl.gz", true, true},
		{"JSON, gzip under a plain name", "reports/fleet.json", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, h := emptyFleet(t)
			now := time.Now()
			// A partial report brings the fleet up, a complete one leaves two out.
			upload(t, tc.key, reportBody(false, up(fleet...), tc.lines), tc.gz)
			res, err := h.Handle(t.Context(), objectEvent(now.Add(-2*time.Second), local.ReportsBucket, tc.key))
			if err != nil || res.Machines != 20 {
				t.Fatalf("partial report: got %+v, %v, want 20 machines applied", res, err)
			}
			lost := `{"id":"M000","lost":true}`
			upload(t, tc.key, reportBody(true, append(up(fleet[1:18]...), lost), tc.lines), tc.gz)
			res, err = h.Handle(t.Context(), objectEvent(now, local.ReportsBucket, tc.key))
			if err != nil || res.Absent != 2 {
				t.Fatalf("complete report: got %+v, %v, want 2 absent", res, err)
			}
			got := states(t, store)
			for i, id := range fleet {
				want := machine.Active
				if i == 0 || i >= 18 {
					want = machine.Dead
				}
				if got[id] != want {
					t.Errorf("%s: got %s, want %s", id, got[id], want)
				}
			}
		})
	}
	t.Run("inline, as before", func(t *testing.T) {
		store, h := emptyFleet(t)
		detail := `{"complete":false,"machines":[` + strings.Join(up(fleet...), ",") + `]}`
		if _, err := h.Handle(t.Context(), json.RawMessage(event(time.Now(), detail))); err != nil {
			t.Fatal(err)
		}
		if got := states(t, store); len(got) != 20 || got["M019"] != machine.Active {
			t.Errorf("got %v, want 20 ACTIVE", got)
		}
	})
}

func TestAReportObjectThatIsNotOneIsRefusedWholeAndChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name, bucket, key, body string
		missing                 bool
	}{
		{name: "an entry without an id", key: "reports/bad.json", body: `{"machines":[{"id":"X1"},{"host":"ghost"}]}`},
		{name: "a JSON Lines entry without an id", key: "reports/bad.jsonl", body: "{}\n{\"id\":\"X1\"}\n{\"host\":\"ghost\"}\n"},
		{name: "no machines list", key: "reports/none.json", body: `{"complete":true}`},
		{name: "machines in another case", key: "reports/case.json", body: `{"MACHINES":[{"id":"X1"}]}`},
		{name: "machines twice", key: "reports/twice.json", body: `{"machines":[{"id":"X1"}],"machines":[]}`},
		{name: "a header line with machines", key: "reports/mixed.jsonl", body: `{"machines":[{"id":"X1"}]}` + "\n"},
		{name: "cut short", key: "reports/short.json", body: `{"machines":[{"id":"X1"},{"id":"X2"`},
		{name: "followed by more", key: "reports/more.json", body: `{"machines":[{"id":"X1"}]} {}`},
		{name: "outside reports/", key: "elsewhere/r.json", body: `{"machines":[{"id":"X1"}]}`},
		{name: "another bucket", bucket: "task-logs", key: "reports/r.json", body: `{"machines":[{"id":"X1"}]}`},
		{name: "no such object", key: "reports/never-written.json", missing: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store, h := emptyFleet(t)
			if !tc.missing {
				upload(t, tc.key, []byte(tc.body), false)
			}
			bucket := tc.bucket
			if bucket == "" {
				bucket = local.ReportsBucket
			}
			if _, err := h.Handle(t.Context(), objectEvent(time.Now(), bucket, tc.key)); err == nil {
				t.Errorf("got no error, want the report refused")
			}
			if got := states(t, store); len(got) != 0 {
				t.Errorf("got %v, want nothing stored", got)
			}
		})
	}
}

func TestAReportObjectIsMadeWhenItWasCreatedNeverLater(t *testing.T) {
	store, h := emptyFleet(t)
	upload(t, "reports/future.json", reportBody(false, up("F1"), false), false)
	before := time.Now()
	if _, err := h.Handle(t.Context(), objectEvent(before.Add(time.Hour), local.ReportsBucket, "reports/future.json")); err != nil {
		t.Fatal(err)
	}
	s, err := store.Get(t.Context(), "F1")
	if err != nil || s == nil {
		t.Fatalf("got %v, %v, want F1", s, err)
	}
	if s.Current.Timestamp > time.Now().UnixMilli() || s.Current.Timestamp < before.Truncate(time.Second).UnixMilli() {
		t.Errorf("got F1 stamped %d, want the receipt time (about %d)", s.Current.Timestamp, before.UnixMilli())
	}
}

// counted counts the DynamoDB calls that write, and the reads by kind.
type counted struct {
	dynamo.API
	writes, scans, itemReads atomic.Int64
}

func (c *counted) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	c.writes.Add(1)
	return c.API.TransactWriteItems(ctx, in, o...)
}

func (c *counted) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.writes.Add(1)
	return c.API.UpdateItem(ctx, in, o...)
}

func (c *counted) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.writes.Add(1)
	return c.API.PutItem(ctx, in, o...)
}

func (c *counted) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	c.writes.Add(1)
	return c.API.DeleteItem(ctx, in, o...)
}

func (c *counted) BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error) {
	c.writes.Add(1)
	return c.API.BatchWriteItem(ctx, in, o...)
}

func (c *counted) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	c.scans.Add(1)
	return c.API.Scan(ctx, in, o...)
}

func (c *counted) TransactGetItems(ctx context.Context, in *dynamodb.TransactGetItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactGetItemsOutput, error) {
	c.itemReads.Add(1)
	return c.API.TransactGetItems(ctx, in, o...)
}

func (c *counted) reset() (writes, scans, itemReads int64) {
	return c.writes.Swap(0), c.scans.Swap(0), c.itemReads.Swap(0)
}

func TestAReportCostsWritesInProportionToWhatChanged(t *testing.T) {
	db := &counted{API: local.DynamoDB}
	store, h := emptyFleetOn(t, db)
	fleet := ids("C", 40)
	now := time.Now().Add(-time.Minute)
	send := func(t *testing.T, at time.Time, machines []string) inventory.Result {
		t.Helper()
		key := "reports/" + at.Format("150405.000") + ".json.gz"
		upload(t, key, reportBody(true, machines, false), true)
		res, err := h.Handle(t.Context(), objectEvent(at, local.ReportsBucket, key))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	send(t, now, up(fleet...))
	batches := int64((len(fleet) + change.CreateBatch - 1) / change.CreateBatch)
	if writes, _, itemReads := db.reset(); writes != batches || itemReads != 0 {
		t.Fatalf("first report: got %d writes and %d machine reads, want the 40 new machines created in %d writes (change.CreateBatch at a time), none read alone", writes, itemReads, batches)
	}
	for _, id := range fleet {
		if s, err := store.Get(t.Context(), id); err != nil || s == nil || s.Current.State != machine.Active {
			t.Fatalf("%s: got %+v, %v, want it created ACTIVE", id, s, err)
		}
	}

	t.Run("an unchanged fleet writes nothing and reads no machine on its own", func(t *testing.T) {
		res := send(t, now.Add(10*time.Second), up(fleet...))
		writes, scans, itemReads := db.reset()
		if writes != 0 || itemReads != 0 || res.Changed != 0 {
			t.Errorf("got %d writes, %d machine reads, %+v, want none", writes, itemReads, res)
		}
		if scans == 0 {
			t.Errorf("got no scan, want the report planned against one")
		}
	})
	changed := up(fleet...)
	changed[7] = strings.Replace(changed[7], `"cpus":4`, `"cpus":8`, 1)
	t.Run("one machine changed writes one", func(t *testing.T) {
		res := send(t, now.Add(20*time.Second), changed)
		if writes, _, itemReads := db.reset(); writes != 1 || itemReads != 1 || res.Changed != 1 {
			t.Errorf("got %d writes, %d machine reads, %+v, want one of each", writes, itemReads, res)
		}
	})
	t.Run("one machine lost writes one", func(t *testing.T) {
		send(t, now.Add(30*time.Second), append(changed[:39], `{"id":"C039","lost":true}`))
		if writes, _, _ := db.reset(); writes != 1 {
			t.Errorf("got %d writes, want 1 (C039 DEAD)", writes)
		}
	})
	// counts is changed[:39] with machine i running tasks[i] tasks.
	counts := func(tasks func(i int) int) []string {
		out := slices.Clone(changed[:39])
		for i := range out {
			out[i] = strings.Replace(out[i], `"runningTasks":1`, fmt.Sprintf(`"runningTasks":%d`, tasks(i)), 1)
		}
		return out
	}
	t.Run("running-task counts moving on ACTIVE machines write nothing", func(t *testing.T) {
		res := send(t, now.Add(40*time.Second), counts(func(i int) int { return i % 7 }))
		if writes, _, _ := db.reset(); writes != 0 || res.Changed != 0 {
			t.Errorf("got %d writes, %+v, want none", writes, res)
		}
	})
	t.Run("a draining machine whose count moves 3 to 1 is written each time, showing its count", func(t *testing.T) {
		decommission := machine.UserChange(machine.Change{SlaveID: "C010", Target: machine.StartingDecommission,
			Now: func() int64 { return now.Add(45 * time.Second).UnixMilli() }}, machine.Limits{})
		if err := store.Apply(t.Context(), "C010", decommission); err != nil {
			t.Fatal(err)
		}
		db.reset()
		for i, n := range []int{3, 1, 1} {
			res := send(t, now.Add(time.Duration(50+i)*time.Second), counts(func(m int) int {
				if m == 10 {
					return n
				}
				return m % 5
			}))
			wantWrites := map[bool]int64{true: 1, false: 0}[i < 2]
			if writes, _, _ := db.reset(); writes != wantWrites || res.Changed != int(wantWrites) {
				t.Errorf("report %d (C010 running %d): got %d writes, %+v, want %d", i+1, n, writes, res, wantWrites)
			}
			s, err := store.Get(t.Context(), "C010")
			if err != nil {
				t.Fatal(err)
			}
			if s.Current.State != machine.Decommissioning || s.RunningTasks == nil || *s.RunningTasks != n {
				t.Errorf("report %d: got %s with running tasks %v, want DECOMMISSIONING with %d", i+1, s.Current.State, s.RunningTasks, n)
			}
		}
	})
}
