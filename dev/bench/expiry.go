package main

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/app/expiryapp"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/sdkconfig"
)

// expiryTimeout is ExpiryFunction's timeout in template.yaml: what one run
// of the trigger may take.
const expiryTimeout = 300 * time.Second

// expiryThroughput writes 10,000 FROZEN slaves, each with an expiring record
// due to revert it to ACTIVE, and times one run of the expiry trigger over
// them, against the emulator, ExpiryFunction built by its composition root
// over a counted client.
func expiryThroughput(ctx context.Context, e *env) ([]row, error) {
	due := 10_000
	if e.quick {
		due = 1_000
	}
	start := time.Now()
	if err := putDue(ctx, e, due); err != nil {
		return nil, err
	}
	loaded := time.Since(start)

	// The emulator answers a Query on an index of thousands of items in
	// seconds (it sorts the index for each); DynamoDB in milliseconds.
	cfg, err := sdkconfig.Load(ctx, sdkconfig.DynamoDB, time.Minute)
	if err != nil {
		return nil, err
	}
	c := newCalls()
	c.count(&cfg)
	expiryEnv, err := functionEnv(e, "ExpiryFunction", nil)
	if err != nil {
		return nil, err
	}
	expire, err := expiryapp.New(ctx, expiryEnv, expiryapp.Options{Log: e.quiet, DynamoDB: dynamodb.NewFromConfig(cfg)})
	if err != nil {
		return nil, err
	}
	start = time.Now()
	res, err := expire(ctx, json.RawMessage(`{"job":"expiry"}`))
	if err != nil {
		return nil, err
	}
	took := time.Since(start)
	_, text := c.take()
	rate := float64(res.Applied) / took.Seconds()
	perRun := int(rate * expiryTimeout.Seconds())
	return []row{
		{figure: fmt.Sprintf("expiry trigger over %d due records (emulator)", due), value: fmt.Sprintf("%.0f records/s (%d applied in %.1f s; %s)", rate, res.Applied, took.Seconds(), text),
			target: fmt.Sprintf("all %d applied", due), met: verdict(res.Applied == due)},
		{figure: "records one 300 s run applies at that rate", value: fmt.Sprintf("%d", perRun)},
		{figure: fmt.Sprintf("%d slaves with due records written (BatchWriteItem)", due), value: fmt.Sprintf("%.1f s", loaded.Seconds())},
	}, nil
}

// putDue writes n FROZEN slaves, their history entry and an expiring record
// due a minute ago, as the store writes them.
func putDue(ctx context.Context, e *env, n int) error {
	now := time.Now().UnixMilli()
	started := now - 2*time.Hour.Milliseconds()
	duration := time.Hour.Milliseconds()
	ts := strconv.FormatInt(started, 10)
	s := func(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }
	num := func(v int64) types.AttributeValue {
		return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
	}
	var slaveItems, historyItems, expiringItems []map[string]types.AttributeValue
	for i := range n {
		id := fmt.Sprintf("due-%05d", i)
		slaveItems = append(slaveItems, map[string]types.AttributeValue{
			"id": s(id), "state": s("FROZEN"), "stateTimestamp": num(started), "stateMessage": s("maintenance"),
			"firstSeenAt": num(started), "host": s(id + ".example.com"), "rackId": s("us-east-1a"),
			"attributes": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}, "version": num(1),
		})
		historyItems = append(historyItems, map[string]types.AttributeValue{
			"slaveId": s(id), "seq": num(1), "state": s("FROZEN"), "timestamp": &types.AttributeValueMemberN{Value: ts}, "message": s("maintenance"),
		})
		h := fnv.New32a()
		h.Write([]byte(id))
		expiringItems = append(expiringItems, map[string]types.AttributeValue{
			"machineId": s(id), "startMillis": num(started), "actionId": s(fmt.Sprintf("action-%05d", i)), "revertToState": s("ACTIVE"),
			"killTasksOnDecommissionTimeout": &types.AttributeValueMemberBOOL{Value: false},
			"request": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"durationMillis": num(duration), "revertToState": s("ACTIVE"), "killTasksOnDecommissionTimeout": &types.AttributeValueMemberBOOL{Value: false},
			}},
			"dueAt": num(started + duration), "dueShard": num(int64(h.Sum32() % 8)), "expiresAt": num((started+duration)/1000 + 7*24*3600),
		})
	}
	for table, items := range map[string][]map[string]types.AttributeValue{
		stack.Tables.Slaves: slaveItems, stack.Tables.History: historyItems, stack.Tables.Expiring: expiringItems,
	} {
		if err := putItems(ctx, e, table, items); err != nil {
			return err
		}
	}
	return nil
}
