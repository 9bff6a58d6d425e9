package jsonerrors_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/dev/jsonerrors"
	"github.com/fleetops/fleet/shared/web"
)

// pipes is a listener of in-memory connections: the tests talk to a real
// http.Server without a network.
type pipes struct {
	conns  chan net.Conn
	closed chan struct{}
}

func newPipes() *pipes { return &pipes{conns: make(chan net.Conn), closed: make(chan struct{})} }

func (p *pipes) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.closed:
		return nil, net.ErrClosed
	}
}

func (p *pipes) Close() error {
	close(p.closed)
	return nil
}

func (p *pipes) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "pipe"} }

func (p *pipes) dial() net.Conn {
	client, server := net.Pipe()
	p.conns <- server
	return client
}

// maxHeaderBytes keeps the oversized-header case small; net/http allows
// 4096 bytes more than it.
const maxHeaderBytes = 1 << 10

// serve starts a server of h on a jsonerrors listener, as the local server
// runs, and returns the listener to dial.
func serve(t *testing.T, h http.Handler) *pipes {
	t.Helper()
	p := newPipes()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, MaxHeaderBytes: maxHeaderBytes}
	go srv.Serve(jsonerrors.Listener(p))
	t.Cleanup(func() { srv.Close() })
	return p
}

// api answers like the API: JSON for everything, a JSON 404 for unknown
// paths; /plain answers in plain text as a handler may.
func api() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/slaves", func(w http.ResponseWriter, r *http.Request) {
		web.JSON(w, http.StatusOK, []string{})
	})
	mux.HandleFunc("GET /plain", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "400 Bad Request", http.StatusBadRequest)
	})
	mux.HandleFunc("POST /api/slaves/slave/{slaveId}/freeze", func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		web.OK(w)
	})
	mux.HandleFunc("/", web.NotFound)
	return mux
}

// exchange sends raw on a new connection, while reading, and returns the
// one answer read.
func exchange(t *testing.T, p *pipes, raw string) *http.Response {
	t.Helper()
	c := p.dial()
	defer c.Close()
	go func() { _, _ = io.WriteString(c, raw) }() // the server may stop reading and close first
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the answer to %.60q: %v", raw, err)
	}
	return res
}

// wantJSONError checks an answer for the API's error form.
func wantJSONError(t *testing.T, res *http.Response, status int, message string) {
	t.Helper()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != status {
		t.Errorf("got status %d (%s), want %d", res.StatusCode, body, status)
	}
	if ct := res.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("got Content-Type %q, want application/json", ct)
	}
	var e web.ErrorBody
	if err := json.Unmarshal(body, &e); err != nil || e.Code != status || e.Message != message {
		t.Errorf("got body %s, want {\"code\":%d,\"message\":%q}", body, status, message)
	}
	if len(body) != int(res.ContentLength) {
		t.Errorf("got %d bytes of body, want its Content-Length %d", len(body), res.ContentLength)
	}
}

func TestNetHTTPsOwnAnswersAreJSONErrors(t *testing.T) {
	p := serve(t, api())
	tests := []struct {
		name, raw string
		status    int
		message   string
	}{
		{"a path with a malformed escape", "GET /api/slaves/slave/%zz/details HTTP/1.1\r\nHost: localhost\r\n\r\n",
			400, "malformed HTTP request: its request line, target or headers cannot be read"},
		{"a target with a space", "GET /api/slaves/a b HTTP/1.1\r\nHost: localhost\r\n\r\n",
			400, "malformed HTTP request: its request line, target or headers cannot be read"},
		{"a request line that is not one", "GARBAGE\r\n\r\n",
			400, "malformed HTTP request: its request line, target or headers cannot be read"},
		{"a method that is no token", "G@T /api/slaves HTTP/1.1\r\nHost: localhost\r\n\r\n",
			400, "malformed HTTP request: its request line, target or headers cannot be read"},
		{"no Host header", "GET /api/slaves HTTP/1.1\r\n\r\n", 400, "missing required Host header"},
		{"a malformed Host header", "GET /api/slaves HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "malformed Host header"},
		{"two Host headers", "GET /api/slaves HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
			400, "malformed HTTP request: its request line, target or headers cannot be read"},
		{"an invalid header name", "GET /api/slaves HTTP/1.1\r\nHost: localhost\r\nBad Header: x\r\n\r\n", 400, "invalid header name"},
		{"two Content-Lengths", "POST /api/slaves/slave/S1/freeze HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
			400, "malformed HTTP request: its request line, target or headers cannot be read"},
		{"headers over the limit", "GET /api/slaves HTTP/1.1\r\nHost: localhost\r\nX-Big: " + strings.Repeat("a", maxHeaderBytes+8<<10) + "\r\n\r\n",
			431, "request header fields too large"},
		{"HTTP/2 in the request line", "GET /api/slaves HTTP/2.0\r\nHost: localhost\r\n\r\n", 505, "unsupported protocol version"},
		{"an unsupported transfer encoding", "POST /api/slaves/slave/S1/freeze HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n",
			501, "unsupported transfer encoding"},
		{"an unsupported expectation", "POST /api/slaves/slave/S1/freeze HTTP/1.1\r\nHost: localhost\r\nExpect: a-miracle\r\nContent-Length: 2\r\n\r\n{}",
			417, "the Expect header supports only 100-continue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := exchange(t, p, tt.raw)
			defer res.Body.Close()
			wantJSONError(t, res, tt.status, tt.message)
			if !res.Close {
				t.Error("got the connection kept open, want it closed")
			}
		})
	}
}

func TestHandlersAnswersPassUnchanged(t *testing.T) {
	p := serve(t, api())
	t.Run("an answer of a route", func(t *testing.T) {
		res := exchange(t, p, "GET /api/slaves HTTP/1.1\r\nHost: localhost\r\n\r\n")
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || string(body) != "[]" || res.Header.Get("Content-Type") != "application/json" {
			t.Errorf("got %d %q %s, want 200 application/json []", res.StatusCode, res.Header.Get("Content-Type"), body)
		}
	})
	t.Run("a route's JSON 404", func(t *testing.T) {
		res := exchange(t, p, "GET /api/nothing HTTP/1.1\r\nHost: localhost\r\n\r\n")
		wantJSONError(t, res, 404, "no route for GET /api/nothing")
	})
	t.Run("a plain-text answer written by a handler", func(t *testing.T) {
		res := exchange(t, p, "GET /plain HTTP/1.1\r\nHost: localhost\r\n\r\n")
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 400 || string(body) != "400 Bad Request\n" || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/plain") {
			t.Errorf("got %d %q %q, want the handler's own plain-text 400", res.StatusCode, res.Header.Get("Content-Type"), body)
		}
	})
	t.Run("requests on a kept-alive connection, then a malformed one", func(t *testing.T) {
		c := p.dial()
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		r := bufio.NewReader(c)
		for range 3 {
			go io.WriteString(c, "POST /api/slaves/slave/S1/freeze HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\n\r\n{}")
			res, err := http.ReadResponse(r, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			if res.StatusCode != 200 || res.Close {
				t.Fatalf("got %d (close %v), want 200 on an open connection", res.StatusCode, res.Close)
			}
		}
		go io.WriteString(c, "GET /api/slaves?x HTTP/1.1\r\nHost: a b\r\n\r\n")
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatal(err)
		}
		wantJSONError(t, res, 400, "malformed Host header")
		if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
			t.Errorf("got %v after the error, want the connection closed", err)
		}
	})
}
