package client

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestAnswersOfAnotherServerAreNotTheAPI(t *testing.T) {
	for _, tc := range []struct {
		name        string
		contentType string
		status      int
		body        string
	}{
		{"an S3 XML 404", "application/xml", 404, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code></Error>`},
		{"an HTML page", "text/html", 200, "<!doctype html><html><body>Welcome</body></html>"},
		{"a plain-text 404", "text/plain", 404, "404 page not found\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &script{answers: []func(http.ResponseWriter, *http.Request){func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}}}
			c, waits := newTest(t, s, Options{})
			_, err := c.ListSlaves(context.Background(), "")
			var notAPI *NotAPIError
			if !errors.As(err, &notAPI) || notAPI.Status != tc.status || notAPI.ContentType != tc.contentType || IsNotFound(err) {
				t.Fatalf("got %#v, want a *NotAPIError of status %d", err, tc.status)
			}
			if strings.Contains(err.Error(), "\n") || len(*waits) != 0 {
				t.Errorf("got %q after %d waits, want one line and no retry", err, len(*waits))
			}
		})
	}
}

func TestRedactHidesTheQueryOfAURL(t *testing.T) {
	signed := "https://bucket.s3.amazonaws.com/r/x.log?X-Amz-Credential=AKIDEXAMPLE%2F20261124&X-Amz-Signature=abcdef"
	err := Redact(&url.Error{Op: "Get", URL: signed, Err: context.Canceled})
	if got := err.Error(); strings.Contains(got, "AKIDEXAMPLE") || strings.Contains(got, "abcdef") || !strings.Contains(got, "/r/x.log") {
		t.Errorf("got %q, want the URL without its query", got)
	}
	if !errors.Is(err, context.Canceled) {
		t.Errorf("got %v, want the cause kept", err)
	}
	if other := errors.New("x"); Redact(other) != other || Redact(nil) != nil {
		t.Error("want other errors returned as they are")
	}
}

func TestTransportErrorsHideTheQuery(t *testing.T) {
	c, err := New(Options{Endpoint: "http://127.0.0.1:9", MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.logs(context.Background(), call{op: "getTaskLogs", method: http.MethodGet, path: "/api/logs/task/t", query: url.Values{"token": {"secret-value"}}, idempotent: true})
	if err == nil || strings.Contains(err.Error(), "secret-value") {
		t.Errorf("got %v, want a transport error without the query", err)
	}
}

func TestACallIsBoundedAndEachRetryIsAnnounced(t *testing.T) {
	// A server that accepts connections and never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	// Attempts enough for minutes: only the call's deadline ends the call
	// (the test's own bound cancels, which is no deadline). The first
	// attempt is cut seconds before the call, so a busy machine still has
	// time to announce the second.
	var retries []int
	c, err := New(Options{Endpoint: "http://" + ln.Addr().String(), MaxAttempts: 100, AttemptTimeout: 300 * time.Millisecond, CallTimeout: 3 * time.Second,
		OnRetry: func(op string, next int, wait time.Duration, err error) { retries = append(retries, next) }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bound := time.AfterFunc(2*time.Minute, cancel)
	_, err = c.ListSlaves(ctx, "")
	if !bound.Stop() {
		t.Errorf("the call ran until the test's bound of 2 minutes, want it cut at its own 3 s")
	}
	var terr *TransportError
	if !errors.As(err, &terr) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("got %v, want a *TransportError of the deadline", err)
	}
	if len(retries) == 0 || retries[0] != 2 {
		t.Errorf("got retries %v, want the second attempt announced", retries)
	}
}
