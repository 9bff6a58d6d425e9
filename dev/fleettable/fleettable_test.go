package fleettable_test

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/fleetops/fleet/dev/fleettable"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/machine"
)

func TestTheTableAnswersTheStoresScanAndStateQueryPageByPage(t *testing.T) {
	const size, frozen = 10_000, 5_000 // each state over 1 MB: more than one page
	table, err := fleettable.New(fleettable.Items(size, frozen), 0)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(table)
	defer srv.Close()
	db := dynamodb.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")},
		func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	store := dynamo.New(db, dynamo.Tables{Slaves: "SlavesTable"}, 0)
	ctx := context.Background()

	seen := map[string]bool{}
	if err := store.List(ctx, func(s machine.Slave) error {
		seen[s.ID] = true
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != size || table.Segments() < 2 {
		t.Errorf("List: got %d slaves in %d segments, want %d in parallel segments", len(seen), table.Segments(), size)
	}
	for _, state := range []machine.State{machine.Frozen, machine.Active} {
		var ids []string
		if err := store.ListByState(ctx, state, func(s machine.Slave) error {
			if s.Current.State != state {
				t.Errorf("ListByState(%s): got %s in %s", state, s.ID, s.Current.State)
			}
			ids = append(ids, s.ID)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(ids); i++ {
			if strings.Compare(ids[i-1], ids[i]) >= 0 {
				t.Fatalf("ListByState(%s): got %s after %s, want id order, each once", state, ids[i], ids[i-1])
			}
		}
		if len(ids) != size-frozen {
			t.Errorf("ListByState(%s): got %d slaves, want %d", state, len(ids), size-frozen)
		}
	}
	if table.Queries() < 4 {
		t.Errorf("got %d Query pages for two states of over 1 MB each, want at least 4", table.Queries())
	}
}
