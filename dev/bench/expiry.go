package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fleetops/fleet/app/expiryapp"
	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/shared/dynamo"
	"github.com/fleetops/fleet/shared/machine"
	"github.com/fleetops/fleet/shared/sdkconfig"
)

// expiryThroughput writes FROZEN slaves, each with an expiring record
// due to revert it to ACTIVE, and times one run of the expiry trigger over
// them, against the emulator, ExpiryFunction built by its composition root
// over a counted client: at two sizes, for the slope (fit) that says what
// 100,000 records falling due together take.
func expiryThroughput(ctx context.Context, e *env) ([]row, error) {
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
	// What one run of the trigger may take: ExpiryFunction's timeout.
	fn, err := e.local.Template.FunctionConfig("ExpiryFunction")
	if err != nil {
		return nil, err
	}
	var rows []row
	var took, calls []point
	for _, due := range []int{e.size(500, 200, 20), e.size(1_500, 500, 50)} {
		start := time.Now()
		if err := putDue(ctx, e, fmt.Sprintf("due%d-", due), due); err != nil {
			return nil, err
		}
		loaded := time.Since(start)
		start = time.Now()
		res, err := expire(ctx, json.RawMessage(`{"job":"expiry"}`))
		if err != nil {
			return nil, err
		}
		run := time.Since(start)
		byOp, text := c.take()
		n := total(byOp)
		took, calls = append(took, point{float64(due), run.Seconds()}), append(calls, point{float64(due), float64(n)})
		rate := float64(res.Applied) / run.Seconds()
		rows = append(rows,
			row{figure: fmt.Sprintf("expiry trigger over %d due records (emulator)", due), value: fmt.Sprintf("%.0f records/s (%d applied in %.1f s; %s)", rate, res.Applied, run.Seconds(), text),
				target: fmt.Sprintf("all %d applied", due), met: verdict(res.Applied == due)},
			row{figure: fmt.Sprintf("records one %v run applies at that rate", fn.Timeout), value: fmt.Sprintf("%d", int(rate*fn.Timeout.Seconds()))},
			row{figure: fmt.Sprintf("%d slaves with due records written (BatchWriteItem)", due), value: fmt.Sprintf("%.1f s", loaded.Seconds())},
		)
	}
	return append(rows, row{figure: fmt.Sprintf("expiry trigger over %s due records (emulator): time, backend calls", thousands(scaleMachines)),
		value: fmt.Sprintf("%s; %s", fit(took...).extrapolated(scaleMachines, seconds), fit(calls...).extrapolated(scaleMachines, count))}), nil
}

// putDue writes n FROZEN slaves, their ids prefix and a number, their
// history entry and an expiring record due a minute ago, as the store
// writes them.
func putDue(ctx context.Context, e *env, prefix string, n int) error {
	now := time.Now().UnixMilli()
	started := now - 2*time.Hour.Milliseconds()
	duration := time.Hour.Milliseconds()
	active := machine.Active
	var slaveItems, historyItems, expiringItems []map[string]types.AttributeValue
	for i := range n {
		id := fmt.Sprintf("%s%05d", prefix, i)
		frozen := machine.Update{SlaveID: id, State: machine.Frozen, Timestamp: started, Message: "maintenance"}
		slave, err := dynamo.SlaveItem(machine.Slave{ID: id, FirstSeenAt: started, Current: frozen, Host: id + ".example.com",
			RackID: "us-east-1a", Attributes: map[string]string{}}, 1)
		if err != nil {
			return err
		}
		entry, err := dynamo.HistoryItem(frozen, 1, 0)
		if err != nil {
			return err
		}
		expiring, err := dynamo.ExpiringItem(machine.Expiring{MachineID: id, StartMillis: started, ActionID: fmt.Sprintf("action-%s%05d", prefix, i),
			RevertTo: active, Request: machine.ChangeRequest{DurationMillis: &duration, RevertToState: &active}})
		if err != nil {
			return err
		}
		slaveItems, historyItems, expiringItems = append(slaveItems, slave), append(historyItems, entry), append(expiringItems, expiring)
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
