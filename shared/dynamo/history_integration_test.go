//go:build integration

package dynamo_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/dynamo"
)

var (
	local  *stack.Local
	tables = stack.Tables
)

// TestMain starts a moto_server of its own and creates the tables from
// template.yaml, so the suite never depends on something already running.
func TestMain(m *testing.M) {
	os.Exit(stack.Main(func(l *stack.Local) int {
		local = l
		return m.Run()
	}))
}

// queries records the Query calls a store makes: the Limit each asked for
// and the items each read.
type queries struct {
	*dynamodb.Client
	mu     sync.Mutex
	limits []int32
	read   int32
}

func (q *queries) Query(ctx context.Context, in *dynamodb.QueryInput, opts ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	out, err := q.Client.Query(ctx, in, opts...)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.limits = append(q.limits, aws.ToInt32(in.Limit))
	if err == nil {
		q.read += out.ScannedCount
	}
	return out, err
}

// writeHistory stores n entries of slave id, seq 1 to n, as the store
// writes them; of the superseded ones (all but seq n), those above seq
// n-expired are past their TTL at now.
func writeHistory(t *testing.T, id string, n, expired int, now time.Time) {
	t.Helper()
	var writes []types.WriteRequest
	for seq := 1; seq <= n; seq++ {
		item := map[string]types.AttributeValue{
			"slaveId":   &types.AttributeValueMemberS{Value: id},
			"seq":       &types.AttributeValueMemberN{Value: strconv.Itoa(seq)},
			"state":     &types.AttributeValueMemberS{Value: "FROZEN"},
			"timestamp": &types.AttributeValueMemberN{Value: strconv.FormatInt(now.UnixMilli()-int64(n-seq), 10)},
			"message":   &types.AttributeValueMemberS{Value: strconv.Itoa(seq)},
		}
		expiresAt := now.Add(time.Hour)
		if seq > n-expired {
			expiresAt = now.Add(-time.Hour)
		}
		if seq < n { // the current entry never expires
			item["expiresAt"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(expiresAt.Unix(), 10)}
		}
		writes = append(writes, types.WriteRequest{PutRequest: &types.PutRequest{Item: item}})
	}
	for len(writes) > 0 {
		batch := writes[:min(25, len(writes))]
		writes = writes[len(batch):]
		if _, err := local.DynamoDB.BatchWriteItem(context.Background(), &dynamodb.BatchWriteItemInput{
			RequestItems: map[string][]types.WriteRequest{tables.History: batch}}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestHistoryReadsNoMoreThanItAnswers(t *testing.T) {
	now := time.Now()
	writeHistory(t, "bounded-S1", 50, 0, now)
	// The newest superseded entries (seq 12 to 29) are past their TTL: the
	// current one (seq 30) and those up to seq 11 are still history.
	writeHistory(t, "bounded-S2", 30, 19, now)

	for _, tt := range []struct {
		name      string
		id        string
		limit     int
		want      []int // seqs, newest first
		queries   []int32
		itemsRead int32
	}{
		{"the newest entries, in one Query of that many items", "bounded-S1", 3, []int{50, 49, 48}, []int32{3}, 3},
		{"a limit beyond the history answers all of it", "bounded-S1", 10000, seqs(50, 1), []int32{10000}, 50},
		{"entries past their TTL cost further pages, each asking for what is still missing", "bounded-S2", 4,
			[]int{30, 11, 10, 9}, []int32{4, 3, 3, 3, 3, 3, 3}, 22},
		{"an unknown slave has none", "bounded-S9", 5, nil, []int32{5}, 0},
		{"a limit of zero reads nothing", "bounded-S1", 0, nil, nil, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := &queries{Client: local.DynamoDB}
			got, err := dynamo.New(q, tables, time.Hour).History(context.Background(), tt.id, now, tt.limit)
			if err != nil {
				t.Fatal(err)
			}
			var seqs []int
			for _, u := range got {
				n, _ := strconv.Atoi(u.Message)
				seqs = append(seqs, n)
			}
			if fmt.Sprint(seqs) != fmt.Sprint(tt.want) {
				t.Errorf("got entries %v, want %v", seqs, tt.want)
			}
			if fmt.Sprint(q.limits) != fmt.Sprint(tt.queries) || q.read != tt.itemsRead {
				t.Errorf("got Queries with Limit %v reading %d items, want %v reading %d", q.limits, q.read, tt.queries, tt.itemsRead)
			}
		})
	}
}

// seqs returns from, from-1, ..., to.
func seqs(from, to int) []int {
	var out []int
	for s := from; s >= to; s-- {
		out = append(out, s)
	}
	return out
}
