// Package fleettable serves a large fleet's slaves table from memory over
// DynamoDB's HTTP API, answering Scan and the ByState index's Query only, in
// pages of at most 1 MB after a fixed latency, as DynamoDB pages a parallel
// scan (a segment's items) and a query (one state's items in id order).
// Every other call (the change feed's reads around a list, a report's
// writes) goes on to the emulator named by Beside, which holds the other
// tables.
// The emulator walks its whole table for every page and takes seconds per
// page on 100,000 slaves; the full list's figures (make bench) and its
// memory bound (the functions' bounds test) are measured over this instead,
// through the real store and SDK.
package fleettable

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"golang.org/x/sync/errgroup"

	"github.com/fleetops/fleet/shared/awsfault"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/machine"
)

// Items returns size slave items as the store writes them
// (dynamo.SlaveItem), frozen of them FROZEN and the rest ACTIVE, with ids
// fleet-000000 onwards.
func Items(size, frozen int) []map[string]types.AttributeValue {
	now := time.Now().UnixMilli()
	items := make([]map[string]types.AttributeValue, size)
	for i := range items {
		state := machine.Active
		if frozen > 0 && i%(size/frozen) == 0 {
			state = machine.Frozen
		}
		id := fmt.Sprintf("fleet-%06d", i)
		s := machine.Slave{
			ID:          id,
			FirstSeenAt: now,
			Current:     machine.Update{SlaveID: id, State: state, Timestamp: now, Message: "Machine reported up"},
			Host:        fmt.Sprintf("node-%06d.us-east-1.compute.internal", i),
			RackID:      fmt.Sprintf("us-east-1%c", 'a'+i%6),
			Attributes:  map[string]string{"instance_type": "m5.4xlarge", "ami": "ami-0abcdef1234567890"},
			Resources:   json.RawMessage(`{"cpus":16,"mem":63000,"disk":500000,"ports":"[31000-32000]"}`),
		}
		item, err := dynamo.SlaveItem(s, 1)
		if err != nil {
			panic(fmt.Sprintf("fleettable: slave %s: %v", id, err)) // a machine.Slave always marshals
		}
		items[i] = item
	}
	return items
}

// Table answers DynamoDB Scan and ByState Query requests over items held in
// DynamoDB's JSON. Item i belongs to segment i % TotalSegments, and an
// item's id must be fleet- and its index (as Items makes them), which is how
// a page's LastEvaluatedKey finds where the next page starts.
type Table struct {
	wire    [][]byte // each item in DynamoDB's JSON
	states  []string // each item's state
	latency time.Duration
	mu      sync.Mutex
	seen    map[int32]bool // the segments asked for
	scans   int
	queries int
	beside  http.Handler // the emulator, for the calls the table does not answer; nil refuses them
}

// New returns a table of items that answers each page after latency.
func New(items []map[string]types.AttributeValue, latency time.Duration) (*Table, error) {
	t := &Table{latency: latency, seen: map[int32]bool{}}
	for _, item := range items {
		raw, err := json.Marshal(Wire(item))
		if err != nil {
			return nil, err
		}
		t.wire = append(t.wire, raw)
		state, _ := item["state"].(*types.AttributeValueMemberS)
		if state == nil {
			return nil, fmt.Errorf("fleettable: item %d has no state", len(t.states))
		}
		t.states = append(t.states, state.Value)
	}
	return t, nil
}

// Beside sends every call the table does not answer itself to the DynamoDB
// endpoint (the local emulator, which holds the other tables), and returns
// t.
func (t *Table) Beside(endpoint string) (*Table, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, fmt.Errorf("fleettable: endpoint %q: %w", endpoint, err)
	}
	t.beside = httputil.NewSingleHostReverseProxy(u)
	return t, nil
}

// Segments returns how many segments were asked for.
func (t *Table) Segments() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.seen)
}

// Scans returns how many pages were answered.
func (t *Table) Scans() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.scans
}

// Queries returns how many Query pages were answered.
func (t *Table) Queries() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.queries
}

// ServeHTTP answers one Scan, or one Query of the ByState index.
func (t *Table) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var in struct {
		Segment                   int32
		TotalSegments             int32
		IndexName                 string
		KeyConditionExpression    string
		ExpressionAttributeValues map[string]map[string]string
		ExclusiveStartKey         map[string]map[string]string
	}
	target := r.Header.Get("X-Amz-Target")
	query := strings.HasSuffix(target, ".Query")
	if err := json.Unmarshal(raw, &in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if !strings.HasSuffix(target, ".Scan") && !(query && in.IndexName == "ByState") {
		if t.beside == nil {
			http.Error(w, "the in-memory table answers Scan and Query of ByState only, not "+target, http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(raw))
		t.beside.ServeHTTP(w, r)
		return
	}
	// A Scan's segment, or a Query's state.
	belongs := func(i int) bool { return int32(i)%max(in.TotalSegments, 1) == in.Segment }
	if query {
		if in.KeyConditionExpression != "#s = :s" {
			http.Error(w, "the in-memory table answers a Query of ByState by state only", http.StatusBadRequest)
			return
		}
		state := in.ExpressionAttributeValues[":s"]["S"]
		belongs = func(i int) bool { return t.states[i] == state }
	}
	t.mu.Lock()
	if query {
		t.queries++
	} else {
		t.seen[in.Segment] = true
		t.scans++
	}
	t.mu.Unlock()
	after := -1
	if k, ok := in.ExclusiveStartKey["id"]; ok {
		after, _ = strconv.Atoi(strings.TrimPrefix(k["S"], "fleet-"))
	}
	var body bytes.Buffer
	body.WriteString(`{"Items":[`)
	count, size, last := 0, 0, -1
	for i := after + 1; i < len(t.wire); i++ {
		if !belongs(i) {
			continue
		}
		if size+len(t.wire[i]) > 1<<20 {
			break
		}
		if count > 0 {
			body.WriteByte(',')
		}
		body.Write(t.wire[i])
		count, size, last = count+1, size+len(t.wire[i]), i
	}
	fmt.Fprintf(&body, `],"Count":%d,"ScannedCount":%d`, count, count)
	if last >= 0 && t.more(last, belongs) {
		// An index's key holds the table's key and the index's own.
		if query {
			fmt.Fprintf(&body, `,"LastEvaluatedKey":{"id":{"S":"fleet-%06d"},"state":{"S":%q}}`, last, t.states[last])
		} else {
			fmt.Fprintf(&body, `,"LastEvaluatedKey":{"id":{"S":"fleet-%06d"}}`, last)
		}
	}
	body.WriteByte('}')
	time.Sleep(t.latency)
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(body.Bytes())), 10))
	w.Header().Set("Content-Length", strconv.Itoa(body.Len()))
	_, _ = w.Write(body.Bytes())
}

// more reports whether an item after index last belongs to the answer.
func (t *Table) more(last int, belongs func(int) bool) bool {
	for i := last + 1; i < len(t.wire); i++ {
		if belongs(i) {
			return true
		}
	}
	return false
}

// Wire is an item in DynamoDB's JSON, as the service's HTTP API carries it.
func Wire(item map[string]types.AttributeValue) map[string]any {
	out := map[string]any{}
	for k, v := range item {
		out[k] = wireValue(v)
	}
	return out
}

func wireValue(v types.AttributeValue) map[string]any {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return map[string]any{"S": v.Value}
	case *types.AttributeValueMemberN:
		return map[string]any{"N": v.Value}
	case *types.AttributeValueMemberBOOL:
		return map[string]any{"BOOL": v.Value}
	case *types.AttributeValueMemberSS:
		return map[string]any{"SS": v.Value}
	case *types.AttributeValueMemberB:
		return map[string]any{"B": v.Value} // encoding/json writes bytes as base64, as DynamoDB's JSON does
	case *types.AttributeValueMemberM:
		return map[string]any{"M": Wire(v.Value)}
	}
	panic(fmt.Sprintf("fleettable: no wire form for %T", v))
}

// Writer is the part of the DynamoDB client Put uses.
type Writer interface {
	BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
}

// Put writes items to table, 25 to a BatchWriteItem, 8 batches at a time,
// sending again what a batch leaves unprocessed (awsfault.Drain).
func Put(ctx context.Context, db Writer, table string, items []map[string]types.AttributeValue) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i := 0; i < len(items); i += 25 {
		batch := items[i:min(i+25, len(items))]
		g.Go(func() error {
			reqs := make([]types.WriteRequest, len(batch))
			for j, item := range batch {
				reqs[j] = types.WriteRequest{PutRequest: &types.PutRequest{Item: item}}
			}
			return awsfault.Drain(ctx, awsfault.DynamoDB, "write slaves to "+table, map[string][]types.WriteRequest{table: reqs},
				func(ctx context.Context, pending map[string][]types.WriteRequest) (map[string][]types.WriteRequest, error) {
					out, err := db.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: pending})
					if err != nil {
						return nil, err
					}
					return out.UnprocessedItems, nil
				})
		})
	}
	return g.Wait()
}
