package web_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fleetops/fleet/shared/web"
)

// listOf answers n slaves-like elements of about 460 bytes, as JSON
// answers a route's slice.
func listOf(n int) http.Handler {
	type row struct {
		ID      string `json:"id"`
		Host    string `json:"host"`
		Message string `json:"message"`
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rows := make([]row, n)
		for i := range rows {
			rows[i] = row{ID: fmt.Sprintf("slave-%07d", i), Host: fmt.Sprintf("host-%d.example.com", i), Message: strings.Repeat("<", 400)}
		}
		web.JSON(w, http.StatusOK, rows)
	})
}

// fetch gets / from a real HTTP server serving h, as a client that does or
// does not accept gzip, and returns the answer with its body read whole
// (decompressed) and the error that ended the read, if any.
func fetch(t *testing.T, h http.Handler, acceptGzip bool) (*http.Response, []byte, error) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/", nil)
	if acceptGzip {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	// A transport of its own, which leaves Accept-Encoding alone.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body io.Reader = res.Body
	if res.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(res.Body)
		if err != nil {
			return res, nil, err
		}
		body = zr
	}
	b, err := io.ReadAll(body)
	return res, b, err
}

func TestAStreamedAnswerHoldsEveryElementWhateverItsSize(t *testing.T) {
	const n = 20000 // about 9 MB uncompressed: past Lambda's buffered 6 MB
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip %v", gz), func(t *testing.T) {
			h := web.Wrap(listOf(n), web.Options{Logger: slog.New(slog.DiscardHandler)})
			res, body, err := fetch(t, h, gz)
			if err != nil {
				t.Fatalf("got a read error %v, want the whole answer", err)
			}
			if !gz && len(body) <= 6<<20 {
				t.Fatalf("got %d bytes, want more than 6 MB for this test to mean anything", len(body))
			}
			var got []struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("got a body that does not parse: %v", err)
			}
			if len(got) != n || got[n-1].ID != fmt.Sprintf("slave-%07d", n-1) {
				t.Fatalf("got %d elements, want all %d in order", len(got), n)
			}
			if enc := res.Header.Get("Content-Encoding"); (enc == "gzip") != gz {
				t.Errorf("got Content-Encoding %q, want gzip only for a client that accepts it", enc)
			}
		})
	}
}

// failingAt is an element whose encoding fails.
type failingAt struct{ fail bool }

func (f failingAt) MarshalJSON() ([]byte, error) {
	if f.fail {
		return nil, errors.New("element cannot be encoded")
	}
	return json.Marshal(strings.Repeat("x", 500))
}

// listFailingAt answers n elements of which element k cannot be encoded.
func listFailingAt(n, k int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rows := make([]failingAt, n)
		rows[k].fail = true
		web.JSON(w, http.StatusOK, rows)
	})
}

func TestAStreamThatFailsHalfWayIsAnAnswerNoParserAccepts(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(fmt.Sprintf("gzip %v", gz), func(t *testing.T) {
			var logs bytes.Buffer
			h := web.Wrap(listFailingAt(20000, 15000), web.Options{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			res, body, err := fetch(t, h, gz)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("got status %d, want the 200 already sent", res.StatusCode)
			}
			if err == nil {
				t.Errorf("got a body that ended cleanly after %d bytes, want the read to fail", len(body))
			}
			if len(body) < 1<<20 {
				t.Errorf("got %d bytes, want the elements before the failure to have been sent", len(body))
			}
			var v any
			if json.Unmarshal(body, &v) == nil {
				t.Fatalf("got %d bytes that parse as JSON, want an answer no parser accepts", len(body))
			}
			if !strings.Contains(logs.String(), `"msg":"answer aborted"`) || !strings.Contains(logs.String(), "element 15000") {
				t.Errorf("got logs %.300s, want the abort logged with its cause", logs.String())
			}
		})
	}
}

func TestAStreamThatFailsBeforeItsFirstByteIsAJSONError(t *testing.T) {
	h := web.Wrap(listFailingAt(20000, 2), web.Options{Logger: slog.New(slog.DiscardHandler)})
	res, body, err := fetch(t, h, false)
	if err != nil {
		t.Fatalf("got a read error %v, want a whole JSON error", err)
	}
	var e web.ErrorBody
	if res.StatusCode != http.StatusInternalServerError || json.Unmarshal(body, &e) != nil || e.Code != http.StatusInternalServerError {
		t.Fatalf("got %d %s, want a JSON 500", res.StatusCode, body)
	}
}
