//go:build integration

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/web"
)

// The local server as a client meets it: the handler stack of make run,
// over the empty stack these tests share (they change nothing in it), on a
// port of its own, spoken to in raw bytes, so that net/http's own parsing
// is part of what is tested.

// startServer serves the local API on 127.0.0.1 and returns its address.
func startServer(t *testing.T) string {
	t.Helper()
	local := empty.get(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	h, err := api(ctx, local, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, h) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// send writes raw on a new connection, while reading the answer.
func send(t *testing.T, addr, raw string) (*http.Response, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go func() { _, _ = io.WriteString(c, raw) }() // the server may answer before it has read everything
	c.SetDeadline(time.Now().Add(20 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the answer to %.80q: %v", raw, err)
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(body)
}

func TestTheLocalServerAnswersMalformedRequestsWithJSONErrors(t *testing.T) {
	addr := startServer(t)
	const unreadable = "malformed HTTP request: its request line, target or headers cannot be read"
	tests := []struct {
		name, raw string
		status    int
		message   string
	}{
		{"a slave id with a malformed escape", "GET /api/slaves/slave/%zz/details HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, unreadable},
		{"a change to a slave id with a malformed escape", "POST /api/slaves/slave/S1%/freeze HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n", 400, unreadable},
		{"a state filter with a malformed escape", "GET /api/slaves?state=FROZEN% HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, "malformed query string"},
		{"a log lookup with a malformed query", "GET /api/logs/request/web-api?start=%zz HTTP/1.1\r\nHost: localhost\r\n\r\n", 400, "malformed query string"},
		{"a request line that is not one", "HELLO\r\n\r\n", 400, unreadable},
		{"no Host header", "GET /api/slaves HTTP/1.1\r\n\r\n", 400, "missing required Host header"},
		{"a malformed Host header", "GET /api/slaves HTTP/1.1\r\nHost: local host\r\n\r\n", 400, "malformed Host header"},
		{"an invalid header name", "GET /api/slaves HTTP/1.1\r\nHost: localhost\r\nX Trace: 1\r\n\r\n", 400, "invalid header name"},
		{"headers over net/http's megabyte", "GET /api/slaves HTTP/1.1\r\nHost: localhost\r\nCookie: " + strings.Repeat("c", http.DefaultMaxHeaderBytes+8<<10) + "\r\n\r\n",
			431, "request header fields too large"},
		{"HTTP/2 in the request line", "GET /api/slaves HTTP/2.0\r\nHost: localhost\r\n\r\n", 505, "unsupported protocol version"},
		{"an unknown route", "GET /api/nothing HTTP/1.1\r\nHost: localhost\r\n\r\n", 404, "no route for GET /api/nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, body := send(t, addr, tt.raw)
			if res.StatusCode != tt.status {
				t.Errorf("got status %d (%s), want %d", res.StatusCode, body, tt.status)
			}
			if ct := res.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", ct)
			}
			var e web.ErrorBody
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Code != tt.status || e.Message != tt.message {
				t.Errorf("got body %s, want {\"code\":%d,\"message\":%q}", body, tt.status, tt.message)
			}
		})
	}
	// The same server answers well-formed requests, on one connection.
	t.Run("well-formed requests on a kept-alive connection", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		r := bufio.NewReader(c)
		for _, target := range []string{"/api/slaves", "/api/slaves?state=FROZEN", "/api/slaves?state=FROZEN%25", "/api/slaves/expiring"} {
			io.WriteString(c, "GET "+target+" HTTP/1.1\r\nHost: localhost\r\n\r\n")
			res, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			want := 200
			if strings.HasSuffix(target, "%25") {
				want = 400 // a state named FROZEN%
			}
			if res.StatusCode != want || res.Header.Get("Content-Type") != "application/json" || res.Close {
				t.Errorf("GET %s: got %d %q %s (close %v), want %d JSON on an open connection", target, res.StatusCode, res.Header.Get("Content-Type"), body, res.Close, want)
			}
		}
	})
}

func TestTheLocalServerServesTheConsoleBesideTheAPI(t *testing.T) {
	addr := startServer(t)
	res, body := send(t, addr, "GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") || !strings.Contains(body, `<script type="module" src="assets/`) {
		t.Fatalf("GET /: got %d %s %.200s, want the console's page", res.StatusCode, res.Header.Get("Content-Type"), body)
	}
	res, body = send(t, addr, "GET /console-config.json HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
	if res.StatusCode != 200 || strings.TrimSpace(body) != `{"auth":"none"}` {
		t.Errorf("GET /console-config.json: got %d %s, want no sign-in (AUTH_MODE none)", res.StatusCode, body)
	}
	res, _ = send(t, addr, "GET /api/slaves HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
	if res.StatusCode != 200 {
		t.Errorf("GET /api/slaves: got %d, want the API beside the console", res.StatusCode)
	}
}
