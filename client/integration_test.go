//go:build integration

package client_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/dev/apidoc"
	"github.com/fleetops/fleet/dev/apitest"
)

var local *apitest.Stack

// TestMain starts moto and MinIO; every answer the tests get is checked
// against openapi.yaml, and a whole run must exercise every operation, so
// a client method that sends something the document does not describe, or
// a route the client cannot reach, fails the suite.
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var err error
	local, err = apitest.Up(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer local.Close()
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" {
		doc, err := apidoc.Load()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// GET /api/slaves/ is GET /api/slaves, which ListSlaves sends.
		if missed := slices.DeleteFunc(doc.Unexercised("/api/"), func(op string) bool { return op == "GET /api/slaves/" }); len(missed) > 0 {
			fmt.Fprintf(os.Stderr, "no client test exercised these operations of openapi.yaml: %s\n", strings.Join(missed, ", "))
			return 1
		}
	}
	return code
}

// newClient serves the API with auth and returns a strict client of it:
// an answer with a field the client does not know fails.
func newClient(t *testing.T, auth apitest.Auth, opts client.Options) *client.Client {
	t.Helper()
	srv, err := local.Serve(t, auth)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	opts.Endpoint = srv.URL
	opts.Strict = true
	c, err := client.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestEveryOperationAgainstTheHandlers(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, apitest.None, client.Options{})
	p := fmt.Sprintf("ops-%d", time.Now().UnixNano())
	ids := []string{p + "-S1", p + "-S2", p + "-S3"}
	from, err := c.FollowChanges(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var machines []apitest.Machine
	for i, id := range ids {
		machines = append(machines, apitest.Machine{ID: id, Host: fmt.Sprintf("node-%d", i), Rack: "us-east-1a",
			Attributes: map[string]string{"instance_type": "m5.large"}, Resources: map[string]any{"cpus": 4}})
	}
	if err := local.Report(ctx, time.Time{}, machines...); err != nil {
		t.Fatal(err)
	}

	all, err := c.ListSlaves(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if !containsSlave(all, ids[2]) {
		t.Errorf("got %d slaves without %s", len(all), ids[2])
	}
	s, err := c.GetSlave(ctx, ids[2])
	if err != nil || s.ID != ids[2] || s.CurrentState.State != client.Active || s.Host != "node-2" {
		t.Fatalf("got %+v, %v, want %s ACTIVE on node-2", s, err, ids[2])
	}
	if _, err := c.GetSlave(ctx, p+"-nope"); !client.IsNotFound(err) {
		t.Errorf("got %v, want a 404", err)
	}

	req := client.ChangeRequest{Message: "kernel upgrade", DurationMillis: (2 * time.Hour).Milliseconds(), RevertToState: client.Active}
	if err := c.FreezeSlave(ctx, ids[0], req, client.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	err = c.FreezeSlave(ctx, ids[0], client.ChangeRequest{}, client.ChangeOptions{})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Code != 409 || !strings.HasPrefix(apiErr.Message, "FAILURE_ALREADY_AT_STATE") {
		t.Errorf("got %v, want 409 FAILURE_ALREADY_AT_STATE", err)
	}
	frozen, err := c.ListSlaves(ctx, "frozen")
	if err != nil || !containsSlave(frozen, ids[0]) || containsSlave(frozen, ids[1]) {
		t.Errorf("got %v, %v, want %s among the frozen and not %s", frozen, err, ids[0], ids[1])
	}
	if _, err := c.ListSlaves(ctx, "sleepy"); !client.IsInvalid(err) {
		t.Errorf("got %v, want a 400 for an unknown state", err)
	}
	exp, err := c.ListExpiring(ctx)
	if err != nil || !containsExpiring(exp, ids[0]) {
		t.Errorf("got %v, %v, want %s's expiring change", exp, err, ids[0])
	}
	if err := c.DeleteExpiring(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.DecommissionSlave(ctx, ids[1], client.ChangeRequest{}, client.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.ActivateSlave(ctx, ids[1], client.ChangeRequest{Message: "back"}, client.ChangeOptions{IdempotencyKey: p}); err != nil {
		t.Fatal(err)
	}
	// The same key again gets the first answer, not a 409 for ACTIVE.
	if err := c.ActivateSlave(ctx, ids[1], client.ChangeRequest{Message: "back"}, client.ChangeOptions{IdempotencyKey: p}); err != nil {
		t.Errorf("got %v for a retry with the same Idempotency-Key, want its first answer", err)
	}
	hist, err := c.GetSlaveHistory(ctx, ids[1], 10)
	if err != nil || len(hist) != 3 || hist[0].State != client.Active || hist[0].Message != "back" {
		t.Errorf("got history %+v, %v, want ACTIVE (back), STARTING_DECOMMISSION, ACTIVE", hist, err)
	}
	if err := local.Report(ctx, time.Time{}, apitest.Machine{ID: ids[2], Host: "node-2", Rack: "us-east-1a", Lost: true}); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteDeadSlaves(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSlave(ctx, ids[2]); !client.IsNotFound(err) {
		t.Errorf("got %v, want the dead slave gone", err)
	}
	if err := c.DeleteSlave(ctx, ids[0]); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSlave(ctx, ids[0]); !client.IsNotFound(err) {
		t.Errorf("got %v, want a 404 for a deleted slave", err)
	}

	// The feed since before the report holds each of those changes once.
	var got []string
	for cursor := from.Cursor; ; {
		page, err := c.FollowChanges(ctx, cursor, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range page.Changes {
			if ch.SlaveID == ids[2] {
				got = append(got, ch.Type+" "+string(ch.PreviousState))
			}
		}
		if cursor = page.Cursor; len(page.Changes) == 0 {
			break
		}
	}
	if want := []string{"added ", "stateChanged ACTIVE", "deleted "}; !slices.Equal(got, want) {
		t.Errorf("the feed of %s: got %q, want %q", ids[2], got, want)
	}
}

// A slave of the old API imported through the client, then again.
func TestImportThroughTheClient(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, apitest.None, client.Options{})
	id := fmt.Sprintf("old-%d", time.Now().UnixNano())
	at := time.Now().Add(-time.Hour).UnixMilli()
	history := []client.StateUpdate{
		{ObjectID: id, State: client.Active, Timestamp: at, Message: "New machine reported"},
		{ObjectID: id, State: client.Frozen, Timestamp: at + 1000, User: "ops@example.com", Message: "disk"},
	}
	old := client.ImportedSlave{Slave: client.Slave{ID: id, FirstSeenAt: at, CurrentState: history[1], Host: "old-1", RackID: "us-east-1a",
		Attributes: map[string]string{}}, History: history}
	for _, want := range []string{"imported", "unchanged"} {
		got, err := c.Import(ctx, []client.ImportedSlave{old}, client.ImportOptions{})
		if err != nil || len(got) != 1 || got[0].ID != id || got[0].Result != want {
			t.Fatalf("got %+v, %v, want %s %s", got, err, id, want)
		}
	}
	hist, err := c.GetSlaveHistory(ctx, id, 10)
	if err != nil || len(hist) != 2 || hist[0] != history[1] {
		t.Errorf("got history %+v, %v, want the imported one, newest first", hist, err)
	}
}

func TestLogOperationsAndTheirPresignedLinks(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, apitest.None, client.Options{})
	now := time.Now().UTC()
	req := fmt.Sprintf("logs%d", now.UnixNano())
	task := fmt.Sprintf("%s-d1-%d-0-node1-us_east_1a", req, now.Add(-48*time.Hour).UnixMilli())
	want := map[string]string{}
	for i := range 3 {
		body := fmt.Sprintf("line %d of %s\n", i, task)
		key, err := local.PutLog(ctx, apitest.Log{TaskID: task, Filename: "stdout", Index: i, Modified: now.Add(-time.Duration(i) * time.Hour), Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		want[key] = body
	}
	since := client.LogQuery{Start: now.Add(-7 * 24 * time.Hour)}
	for name, get := range map[string]func() ([]client.Log, error){
		"task":    func() ([]client.Log, error) { return c.GetTaskLogs(ctx, task, client.LogQuery{}) },
		"request": func() ([]client.Log, error) { return c.GetRequestLogs(ctx, req, since) },
		"deploy":  func() ([]client.Log, error) { return c.GetDeployLogs(ctx, req, "d1", since) },
		"search": func() ([]client.Log, error) {
			return c.SearchAllLogs(ctx, client.SearchRequest{TaskIDs: []string{task}, MaxPerPage: 1})
		},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := get()
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d logs, want %d", len(got), len(want))
			}
			for _, l := range got {
				resp, err := http.Get(l.DownloadURL)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 || string(body) != want[l.Key] {
					t.Errorf("%s: got %d %q through its downloadUrl, want %q", l.Key, resp.StatusCode, body, want[l.Key])
				}
			}
		})
	}
	if _, err := c.GetTaskLogs(ctx, "not-a-task", client.LogQuery{}); !client.IsInvalid(err) {
		t.Errorf("got %v, want a 400 for a malformed task id", err)
	}
	if list, err := c.GetTaskLogs(ctx, task, client.LogQuery{ListOnly: true, ExcludeMetadata: true}); err != nil || len(list) != 3 || list[0].DownloadURL != "" || list[0].StartTime != 0 {
		t.Errorf("got %+v, %v, want 3 logs without links or metadata", list, err)
	}
}

func TestAuthModes(t *testing.T) {
	ctx := context.Background()
	p := fmt.Sprintf("auth-%d", time.Now().UnixNano())
	if err := local.Report(ctx, time.Time{}, apitest.Machine{ID: p, Host: "h", Rack: "r"}); err != nil {
		t.Fatal(err)
	}
	status := func(err error) int { return client.StatusOf(err) }

	anonymous := newClient(t, apitest.Tokens, client.Options{})
	if _, err := anonymous.ListSlaves(ctx, ""); status(err) != 401 {
		t.Errorf("no token: got %v, want 401", err)
	}
	reader := newClient(t, apitest.Tokens, client.Options{Auth: client.Bearer(apitest.ReaderToken)})
	if _, err := reader.GetSlave(ctx, p); err != nil {
		t.Errorf("reader reading: got %v, want success", err)
	}
	if err := reader.FreezeSlave(ctx, p, client.ChangeRequest{}, client.ChangeOptions{}); status(err) != 403 || !client.IsAuth(err) {
		t.Errorf("reader changing: got %v, want 403", err)
	}

	signer := &client.SigV4{Credentials: credentials.NewStaticCredentialsProvider(apitest.SigV4AccessKey, apitest.SigV4SecretKey, ""), Region: apitest.SigV4Region}
	signed := newClient(t, apitest.SigV4, client.Options{Auth: signer, Header: http.Header{"X-Team": {"ops"}}})
	if err := signed.FreezeSlave(ctx, p, client.ChangeRequest{Message: "signed"}, client.ChangeOptions{}); err != nil {
		t.Errorf("signed change: got %v, want success", err)
	}
	if _, err := signed.SearchLogs(ctx, client.SearchRequest{TaskIDs: []string{"a-b-1-0-h-r"}}); err != nil {
		t.Errorf("signed search: got %v, want success", err)
	}
	wrong := &client.SigV4{Credentials: credentials.NewStaticCredentialsProvider(apitest.SigV4AccessKey, "not-the-secret", ""), Region: apitest.SigV4Region}
	forged := newClient(t, apitest.SigV4, client.Options{Auth: wrong})
	if _, err := forged.GetSlave(ctx, p); status(err) != 403 || !strings.Contains(err.Error(), "signature") {
		t.Errorf("wrong secret: got %v, want 403 for the signature", err)
	}
}

func containsSlave(list []client.Slave, id string) bool {
	for _, s := range list {
		if s.ID == id {
			return true
		}
	}
	return false
}

func containsExpiring(list []client.Expiring, id string) bool {
	for _, e := range list {
		if e.MachineID == id {
			return true
		}
	}
	return false
}
