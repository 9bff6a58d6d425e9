//go:build integration

package stack

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func TestUpCreatesTheTemplateTablesIdempotently(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	local, err := Up(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := local.Close(); err != nil {
			t.Error(err)
		}
	})
	if !local.Moto.Started {
		t.Fatal("port 0 should start a new server")
	}
	if got := os.Getenv("AWS_ENDPOINT_URL"); got != local.Moto.Endpoint {
		t.Errorf("AWS_ENDPOINT_URL: got %q, want %q", got, local.Moto.Endpoint)
	}

	// The log buckets of LogsFunction exist, and creating them again is fine.
	if !slices.Equal(local.LogBuckets, []string{"task-logs"}) {
		t.Errorf("log buckets: got %v, want [task-logs]", local.LogBuckets)
	}
	if err := CreateBuckets(ctx, local.S3, local.LogBuckets...); err != nil {
		t.Errorf("second CreateBuckets: %v", err)
	}

	// A second run finds the tables and keeps them.
	if err := local.Template.CreateTables(ctx, local.DynamoDB, LocalName); err != nil {
		t.Fatalf("second CreateTables: %v", err)
	}
	tables, err := local.DynamoDB.ListTables(ctx, &dynamodb.ListTablesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tables.TableNames, []string{"ChangesTable", "ExpiringTable", "HistoryTable", "LogIndexTable", "RequestsTable", "SlavesTable"}; !slices.Equal(got, want) {
		t.Errorf("tables: got %v, want %v", got, want)
	}

	for _, tc := range []struct {
		table      string
		keys       []string
		indexes    map[string][]string
		projection types.ProjectionType
		ttl        string
	}{
		{"SlavesTable", []string{"id HASH"}, map[string][]string{"ByState": {"state HASH", "id RANGE"}}, types.ProjectionTypeAll, ""},
		{"HistoryTable", []string{"slaveId HASH", "seq RANGE"}, nil, "", "expiresAt"},
		{"ExpiringTable", []string{"machineId HASH"}, map[string][]string{"ByDue": {"dueShard HASH", "dueAt RANGE"}}, types.ProjectionTypeKeysOnly, "expiresAt"},
	} {
		t.Run(tc.table, func(t *testing.T) {
			out, err := local.DynamoDB.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(tc.table)})
			if err != nil {
				t.Fatal(err)
			}
			d := out.Table
			if got := keyStrings(d.KeySchema); !slices.Equal(got, tc.keys) {
				t.Errorf("keys: got %v, want %v", got, tc.keys)
			}
			if d.BillingModeSummary == nil || d.BillingModeSummary.BillingMode != types.BillingModePayPerRequest {
				t.Errorf("billing: got %+v, want PAY_PER_REQUEST", d.BillingModeSummary)
			}
			if len(d.GlobalSecondaryIndexes) != len(tc.indexes) {
				t.Errorf("indexes: got %d, want %d", len(d.GlobalSecondaryIndexes), len(tc.indexes))
			}
			for _, ix := range d.GlobalSecondaryIndexes {
				if got, want := keyStrings(ix.KeySchema), tc.indexes[aws.ToString(ix.IndexName)]; !slices.Equal(got, want) {
					t.Errorf("index %s: got %v, want %v", aws.ToString(ix.IndexName), got, want)
				}
				if ix.Projection == nil || ix.Projection.ProjectionType != tc.projection {
					t.Errorf("index %s: projection %+v, want %s", aws.ToString(ix.IndexName), ix.Projection, tc.projection)
				}
			}
			ttl, err := local.DynamoDB.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(tc.table)})
			if err != nil {
				t.Fatal(err)
			}
			enabled := ttl.TimeToLiveDescription.TimeToLiveStatus == types.TimeToLiveStatusEnabled
			if got := aws.ToString(ttl.TimeToLiveDescription.AttributeName); enabled != (tc.ttl != "") || got != tc.ttl {
				t.Errorf("TTL: got %q (%s), want %q", got, ttl.TimeToLiveDescription.TimeToLiveStatus, tc.ttl)
			}
		})
	}
}

func TestStartMotoReusesAServerThatAnswers(t *testing.T) {
	ctx := context.Background()
	first, err := StartMoto(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer first.Stop()

	addr := first.Endpoint[len("http://"):]
	second, err := StartMoto(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	if second.Started || second.Endpoint != first.Endpoint {
		t.Errorf("got started=%v endpoint=%s, want the running %s reused", second.Started, second.Endpoint, first.Endpoint)
	}
	if err := second.Stop(); err != nil {
		t.Errorf("Stop of a reused server: %v", err)
	}
	if _, err := DynamoDBClient(first.Endpoint).ListTables(ctx, &dynamodb.ListTablesInput{}); err != nil {
		t.Errorf("the reused server stopped: %v", err)
	}

	if err := first.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if answers(ctx, first.Endpoint) {
		t.Errorf("%s still answers after Stop", first.Endpoint)
	}
}

func TestCreateTablesRejectsATableOfAnotherShape(t *testing.T) {
	ctx := context.Background()
	client := freshEmulator(t)

	other := parse(t, pkTable("SlavesTable"))
	if err := other.CreateTables(ctx, client, LocalName); err != nil {
		t.Fatal(err)
	}
	root, _ := RepoRoot()
	tpl, err := LoadTemplate(filepath.Join(root, TemplateFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := tpl.CreateTables(ctx, client, LocalName); err == nil {
		t.Error("got no error for a SlavesTable keyed on pk")
	}
}

// moto's own server applies a transaction without a lock and rolls back by
// restoring a copy of the table, which under load (hundreds of items, many
// writers) drops concurrent writes now and then; motoserver.py serializes
// requests. This small run guards the behaviour the service relies on: one
// winner per conditional claim, and no write lost beside a cancelled one.
// The table holds a few hundred items first: the copy moto restores takes
// long enough then for the race to show (without the lock, moto 5.2.1 lets
// two transactions win and loses a plain write in most runs).
func TestMotoRunsTransactionsOneAtATime(t *testing.T) {
	ctx := context.Background()
	client := freshEmulator(t)
	tpl := parse(t, pkTable("T"))
	if err := tpl.CreateTables(ctx, client, LocalName); err != nil {
		t.Fatal(err)
	}
	const filler = 300
	for i := 0; i < filler; i += 25 {
		var puts []types.WriteRequest
		for j := i; j < i+25; j++ {
			puts = append(puts, types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
				"pk":  &types.AttributeValueMemberS{Value: fmt.Sprintf("filler-%03d", j)},
				"pad": &types.AttributeValueMemberS{Value: strings.Repeat("x", 200)},
			}}})
		}
		if _, err := client.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{RequestItems: map[string][]types.WriteRequest{"T": puts}}); err != nil {
			t.Fatal(err)
		}
	}

	const writers = 48
	won := make(chan int, writers)
	errs := make(chan error, 2*writers)
	done := make(chan struct{})
	for i := range writers {
		go func() {
			defer func() { done <- struct{}{} }()
			s := aws.String(fmt.Sprint(i))
			// Every writer claims the same item; only one may win.
			_, err := client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
				TransactItems: []types.TransactWriteItem{
					{Put: &types.Put{
						TableName:           aws.String("T"),
						Item:                map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "claim"}, "owner": &types.AttributeValueMemberS{Value: *s}},
						ConditionExpression: aws.String("attribute_not_exists(pk)"),
					}},
					{Put: &types.Put{
						TableName: aws.String("T"),
						Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "won-" + *s}},
					}},
				},
			})
			var canceled *types.TransactionCanceledException
			switch {
			case err == nil:
				won <- i
			case !errors.As(err, &canceled):
				errs <- err
			}
			// A plain write beside the transactions must never be lost.
			if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{
				TableName: aws.String("T"),
				Item:      map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "plain-" + *s}},
			}); err != nil {
				errs <- err
			}
		}()
	}
	for range writers {
		<-done
	}
	close(won)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := len(won); n != 1 {
		t.Errorf("%d transactions won the same claim, want 1", n)
	}
	out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("T")})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(out.Items), filler+1+1+writers; got != want {
		t.Errorf("got %d items, want %d (the claim, its winner's entry and every plain write)", got, want)
	}
}

// empty is the emulator of the tests that need one holding nothing
// (emptyMoto), started once for the package.
var empty SharedMoto

func TestMain(m *testing.M) {
	code := m.Run()
	empty.Stop()
	os.Exit(code)
}

// freshEmulator empties the package's emulator (emptyMoto) and returns a
// client of it.
func freshEmulator(t *testing.T) *dynamodb.Client {
	t.Helper()
	return DynamoDBClient(emptyMoto(t).Endpoint)
}

// emptyMoto empties the package's emulator, as a new one starts, and
// returns it.
func emptyMoto(t *testing.T) *Moto {
	t.Helper()
	moto, err := empty.Empty(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return moto
}

// pkTable is a template with one table, logicalID, keyed on a string pk.
func pkTable(logicalID string) string {
	return `
Resources:
  ` + logicalID + `:
    Type: AWS::DynamoDB::Table
    Properties:
      BillingMode: PAY_PER_REQUEST
      AttributeDefinitions: [{AttributeName: pk, AttributeType: S}]
      KeySchema: [{AttributeName: pk, KeyType: HASH}]
`
}

// A shell set up for a real account, as a developer's is: a profile that
// exists on their machine but not here, config and credentials files that
// hold other profiles or none, no region. The emulator started from it must
// answer, and the local stack must say what it ignores before it starts
// anything.
func TestUpWorksFromAShellWithAProfileThatDoesNotExistHere(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "config")
	if err := os.WriteFile(config, []byte("[profile someone-else]\nregion = eu-west-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_PROFILE", "prod")
	t.Setenv("AWS_CONFIG_FILE", config)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "no-such-credentials"))
	for _, k := range []string{"AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_ENDPOINT_URL"} {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var progress strings.Builder
	local, err := UpWithProgress(ctx, "127.0.0.1:0", &progress)
	if err != nil {
		t.Fatalf("got %v, want the tables created\n%s", err, progress.String())
	}
	t.Cleanup(func() { local.Close() })
	if _, err := local.S3.ListBuckets(ctx, nil); err != nil {
		t.Errorf("S3 of the emulator: %v", err)
	}
	out := progress.String()
	ignoring, starting := strings.Index(out, "(ignoring AWS_CONFIG_FILE, AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE)"), strings.Index(out, "local stack: starting moto")
	if ignoring < 0 || starting < 0 || ignoring > starting {
		t.Errorf("got\n%s\nwant the ignored variables named before moto starts", out)
	}
}

// TestMotoAnswersQueryAndScanWithTheItemsItStores stores items of every
// attribute type and reads them back with GetItem (moto's own serializer),
// Query and Scan (whose items the launcher writes as plain JSON), and
// walks string keys in key order.
func TestMotoAnswersQueryAndScanWithTheItemsItStores(t *testing.T) {
	ctx := context.Background()
	client := freshEmulator(t)
	tpl := parse(t, pkTable("T"))
	if err := tpl.CreateTables(ctx, client, LocalName); err != nil {
		t.Fatal(err)
	}
	every := func(pk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"pk":   &types.AttributeValueMemberS{Value: pk},
			"s":    &types.AttributeValueMemberS{Value: "<é 漢 \"q\" \\ \u2028 \x01>"},
			"n":    &types.AttributeValueMemberN{Value: "-12.5"},
			"b":    &types.AttributeValueMemberB{Value: []byte{0, 1, 0xff, '"'}},
			"ss":   &types.AttributeValueMemberSS{Value: []string{"a", "<b>"}},
			"ns":   &types.AttributeValueMemberNS{Value: []string{"1", "2.5"}},
			"bs":   &types.AttributeValueMemberBS{Value: [][]byte{{0}, {1, 2}}},
			"l":    &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberNULL{Value: true}, &types.AttributeValueMemberBOOL{Value: false}}},
			"m":    &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"k": &types.AttributeValueMemberS{Value: "v"}, "e": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}}},
			"null": &types.AttributeValueMemberNULL{Value: true},
			"t":    &types.AttributeValueMemberBOOL{Value: true},
		}
	}
	keys := []string{"b", "a", "B", "é", "a0"}
	for _, k := range keys {
		if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("T"), Item: every(k)}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("T"), Key: map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := got.Item
	query, err := client.Query(ctx, &dynamodb.QueryInput{TableName: aws.String("T"), KeyConditionExpression: aws.String("pk = :k"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":k": &types.AttributeValueMemberS{Value: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(query.Items) != 1 || !reflect.DeepEqual(query.Items[0], want) {
		t.Errorf("Query: got %#v, want the item GetItem answers, %#v", query.Items, want)
	}
	var scanned []string
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String("T"), Limit: aws.Int32(2)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range page.Items {
			pk := item["pk"].(*types.AttributeValueMemberS).Value
			scanned = append(scanned, pk)
			if pk == "a" && !reflect.DeepEqual(item, want) {
				t.Errorf("Scan: got %#v, want the item GetItem answers, %#v", item, want)
			}
		}
	}
	if slices.Sort(keys); !slices.Equal(scanned, keys) {
		t.Errorf("Scan in pages of 2: got keys %q, want each once, in key order %q", scanned, keys)
	}
}

// RecreateTables leaves every table of the template empty, whether it held
// items or was gone already, as after a call that stopped half-way.
func TestRecreateTablesEmptiesThemAndTakesOneAlreadyGone(t *testing.T) {
	ctx := context.Background()
	client := freshEmulator(t)
	tpl := parse(t, pkTable("A")+strings.TrimPrefix(pkTable("B"), "\nResources:\n"))
	if err := tpl.CreateTables(ctx, client, LocalName); err != nil {
		t.Fatal(err)
	}
	item := map[string]types.AttributeValue{"pk": &types.AttributeValueMemberS{Value: "left"}}
	if _, err := client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("A"), Item: item}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String("B")}); err != nil {
		t.Fatal(err)
	}
	if err := tpl.RecreateTables(ctx, client, LocalName); err != nil {
		t.Fatalf("got %v, want the tables recreated, B's absence taken as deleted", err)
	}
	for _, name := range []string{"A", "B"} {
		out, err := client.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(name)})
		switch {
		case err != nil:
			t.Errorf("%s: %v; want the table, empty", name, err)
		case out.Count != 0:
			t.Errorf("%s: got %d items, want the table empty", name, out.Count)
		}
	}
}
