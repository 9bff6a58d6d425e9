// Command events shows the local stack's "Slave Changed" events as they
// arrive (make events): it routes the local bus's events to a queue of its
// own and prints a line per event, or with -json each event's detail (the
// change as the feed answers it) as a line of JSON, until Ctrl-C, when it
// removes its rule and queue. make run publishes the events: its
// PublisherFunction handler reads the changes table's stream. Delivery is
// at least once; an event already shown (the same slave and sequence) is
// marked as a duplicate. Text from the service is rendered as fleetctl
// renders it (internal/termtext).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/fleetops/fleet/dev/stack"
	"github.com/fleetops/fleet/internal/termtext"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	asJSON := flag.Bool("json", false, "print each event's detail as a line of JSON")
	flag.Parse()
	if err := run(ctx, *asJSON, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "make events:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, asJSON bool, out io.Writer) error {
	local, err := stack.UpWith(ctx, stack.Addr(), stack.Options{Command: "make events", Progress: os.Stderr})
	if err != nil {
		return err
	}
	defer local.Close()
	if local.Moto.Started {
		return errors.New("no make run is serving: start make run first, which publishes the events, then make events")
	}
	name := fmt.Sprintf("make-events-%d", os.Getpid())
	url, err := local.RouteSlaveEvents(ctx, name)
	if err != nil {
		return err
	}
	queues := local.SQS()
	defer func() {
		cleanup, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := local.UnrouteSlaveEvents(cleanup, name, url); err != nil {
			fmt.Fprintln(os.Stderr, "make events: remove its rule and queue:", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "make events: showing the Slave Changed events of %s as they arrive; Ctrl-C stops\n", local.Moto.Endpoint)
	seen := map[string]bool{}
	for ctx.Err() == nil {
		msgs, err := queues.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 1})
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return fmt.Errorf("read the events: %w", err)
		}
		var shown []sqstypes.DeleteMessageBatchRequestEntry
		for i, m := range msgs.Messages {
			line, err := render(aws.ToString(m.Body), asJSON, seen)
			if err != nil {
				fmt.Fprintln(os.Stderr, "make events:", err)
			} else {
				fmt.Fprintln(out, line)
			}
			shown = append(shown, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		}
		// One request for the batch: the emulator answers one request at a
		// time, and while a large report keeps it busy every request waits
		// its turn, so ten deletes would take ten turns.
		if len(shown) > 0 {
			queues.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: shown})
		}
	}
	return nil
}

// event is the part of an EventBridge event and of its detail a line shows.
type event struct {
	Time   string          `json:"time"`
	Detail json.RawMessage `json:"detail"`
}

type detail struct {
	SlaveID       string `json:"slaveId"`
	Type          string `json:"type"`
	Sequence      int64  `json:"sequence"`
	PreviousState string `json:"previousState"`
	Update        *struct {
		State   string `json:"state"`
		User    string `json:"user"`
		Message string `json:"message"`
	} `json:"update"`
}

// render is one event's line; seen holds the (slave, sequence) pairs shown.
func render(body string, asJSON bool, seen map[string]bool) (string, error) {
	var e event
	var d detail
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		return "", fmt.Errorf("an event that is not JSON: %w", err)
	}
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return "", fmt.Errorf("an event whose detail is not a change: %w", err)
	}
	key := d.SlaveID + "\x00" + strconv.FormatInt(d.Sequence, 10)
	duplicate := seen[key]
	seen[key] = true
	if asJSON {
		return termtext.Visible(string(e.Detail)), nil
	}
	fields := []string{termtext.Visible(e.Time), termtext.Visible(d.SlaveID), termtext.Visible(d.Type), "seq " + strconv.FormatInt(d.Sequence, 10)}
	if u := d.Update; u != nil {
		state := termtext.Visible(u.State)
		if d.PreviousState != "" {
			state = termtext.Visible(d.PreviousState) + " -> " + state
		}
		fields = append(fields, state)
		if u.User != "" {
			fields = append(fields, "by "+termtext.Visible(u.User))
		}
		if u.Message != "" {
			fields = append(fields, termtext.Visible(strconv.Quote(u.Message)))
		}
	}
	if duplicate {
		fields = append(fields, "(duplicate)")
	}
	return strings.Join(fields, "  "), nil
}
