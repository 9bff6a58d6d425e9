package edge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/web"
)

// readStreamed reads an answer in the streaming format the way API
// Gateway does: the JSON prelude up to eight NUL bytes, then the body. It
// returns the error that ended the body, if any.
func readStreamed(t *testing.T, r io.Reader) (status int, header map[string]string, body []byte, err error) {
	t.Helper()
	raw, err := io.ReadAll(r)
	i := bytes.Index(raw, make([]byte, 8))
	if i < 0 {
		t.Fatalf("got %.200q, want a prelude ended by eight NUL bytes", raw)
	}
	var prelude struct {
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
	}
	if err := json.Unmarshal(raw[:i], &prelude); err != nil {
		t.Fatalf("got prelude %q: %v", raw[:i], err)
	}
	return prelude.StatusCode, prelude.Headers, raw[i+8:], err
}

func streamEvent(t *testing.T, path string) json.RawMessage {
	t.Helper()
	return json.RawMessage(fmt.Sprintf(`{"httpMethod":"GET","path":%q,"headers":{},"requestContext":{"requestId":"gw-1"}}`, path))
}

func TestStreamHandlerAnswersAListLargerThanLambdasBufferedLimitWhole(t *testing.T) {
	const n = 20000
	rows := make([]string, n)
	for i := range rows {
		rows[i] = fmt.Sprintf("%06d%s", i, strings.Repeat("<", 400)) // about 2.4 KB as JSON escapes it
	}
	h := web.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { web.JSON(w, http.StatusOK, rows) }),
		web.Options{Logger: slog.New(slog.DiscardHandler), RequestID: RequestID})
	res, err := StreamHandler(h)(context.Background(), streamEvent(t, "/api/slaves"))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	status, header, body, err := readStreamed(t, res)
	if err != nil || status != http.StatusOK {
		t.Fatalf("got status %d and error %v, want a whole 200", status, err)
	}
	if header["Content-Type"] != "application/json" || header["X-Result-Truncated"] != "" {
		t.Errorf("got headers %v, want JSON and no truncation", header)
	}
	var got []string
	if err := json.Unmarshal(body, &got); err != nil || len(got) != n || got[n-1] != rows[n-1] {
		t.Fatalf("got %d elements (%v) in %d bytes, want all %d", len(got), err, len(body), n)
	}
	if len(body) <= 6<<20 {
		t.Errorf("got %d bytes, want more than Lambda's buffered 6 MB for this test to mean anything", len(body))
	}
}

func TestStreamHandlerEndsAnAbortedAnswerWithAnError(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`[1,2,`))
		panic(http.ErrAbortHandler)
	})
	res, err := StreamHandler(h)(context.Background(), streamEvent(t, "/api/slaves"))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Close()
	status, _, body, err := readStreamed(t, res)
	if status != http.StatusOK || !errors.Is(err, errStreamAborted) {
		t.Fatalf("got status %d and error %v, want the 200 sent and the body ended by %v", status, err, errStreamAborted)
	}
	if string(body) != `[1,2,` {
		t.Errorf("got body %q, want what was written before the abort", body)
	}
}

func TestStreamHandlerAnswersAMalformedEventWithAJSON400(t *testing.T) {
	called := false
	h := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { called = true })
	res, err := StreamHandler(h)(context.Background(), streamEvent(t, "%2Fapi"))
	if err != nil {
		t.Fatal(err)
	}
	status, header, body, err := readStreamed(t, res)
	var e struct{ Code int }
	if err != nil || status != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || e.Code != http.StatusBadRequest || header["Content-Type"] != "application/json" {
		t.Fatalf("got %d %v %q (%v), want a JSON 400", status, header, body, err)
	}
	if called {
		t.Error("the handler was called for a malformed event")
	}
	if _, err := StreamHandler(h)(context.Background(), json.RawMessage(`{"detail":{}}`)); !errors.Is(err, ErrNotProxyEvent) {
		t.Errorf("got %v for an event that is no proxy event, want ErrNotProxyEvent", err)
	}
}

func TestStreamHandlerGivesTheHandlerLambdasDeadlineLessTheMargin(t *testing.T) {
	deadline := time.Now().Add(time.Minute)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var got time.Time
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got, _ = r.Context().Deadline() })
	res, err := StreamHandler(h)(ctx, streamEvent(t, "/api/slaves"))
	if err != nil {
		t.Fatal(err)
	}
	readStreamed(t, res)
	if !got.Equal(deadline.Add(-AnswerMargin)) {
		t.Errorf("got deadline %v, want %v", got, deadline.Add(-AnswerMargin))
	}
}

// Every sample event of a streamed route answers in the streaming format.
func TestStreamHandlerServesTheSampleEvents(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "events", "slaves-list*.json"))
	if len(files) == 0 {
		t.Fatal("no events/slaves-list*.json")
	}
	for _, f := range files {
		event, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { web.JSON(w, http.StatusOK, []string{r.URL.Path}) })
		res, err := StreamHandler(h)(context.Background(), event)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if status, _, body, err := readStreamed(t, res); err != nil || status != http.StatusOK || !json.Valid(body) {
			t.Errorf("%s: got %d %q (%v), want a JSON 200", f, status, body, err)
		}
	}
}
