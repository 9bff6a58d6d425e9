package stack

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"
)

func TestTheChangeDeliverySaysOnceThatItLagsAndOnceThatItCaughtUp(t *testing.T) {
	var log bytes.Buffer
	r := shardReader{shard: "shard-1", log: slog.New(slog.NewTextHandler(&log, nil))}
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	batch := func(created time.Time) []streamtypes.Record {
		return []streamtypes.Record{{Dynamodb: &streamtypes.StreamRecord{ApproximateCreationDateTime: aws.Time(created)}}}
	}
	var lag lagReport
	lag.observe(r, batch(start), start.Add(time.Second))           // on time
	lag.observe(r, batch(start), start.Add(changeLag+time.Second)) // behind
	for i := range 20 {                                            // still behind, further
		lag.observe(r, batch(start), start.Add(changeLag+time.Duration(i+2)*time.Second))
	}
	lag.caughtUp(r, start.Add(time.Minute)) // an empty read
	lag.caughtUp(r, start.Add(2*time.Minute))

	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want one that it lags and one that it caught up:\n%s", len(lines), log.String())
	}
	if !strings.Contains(lines[0], "runs behind") || !strings.Contains(lines[0], "behind=6s") {
		t.Errorf("got %q, want the line that it runs behind, 6s", lines[0])
	}
	if !strings.Contains(lines[1], "caught up") || !strings.Contains(lines[1], "worst=26s") {
		t.Errorf("got %q, want the line that it caught up, at worst 26s behind", lines[1])
	}
}
