//go:build resilience

package main

import (
	"context"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// fault is one way a backend call goes wrong.
type fault int

const (
	throttled  fault = iota // ProvisionedThroughputExceededException (DynamoDB) or SlowDown (S3)
	serverErr               // a 500
	hang                    // no answer until the attempt's timeout cuts it off
	dropBefore              // the connection drops before the request reaches the server
	dropAfter               // the server applies the request, then the connection drops
	faultKinds
)

var faultNames = [faultKinds]string{"throttled", "500", "timeout", "dropped-before", "dropped-after"}

// faulty is an http.RoundTripper in front of the emulator that fails a share
// of the SDK's HTTP requests (each attempt is one) the way AWS and networks
// fail, so the SDK's retryer and the service's error mapping meet them as
// they would in production.
type faulty struct {
	next   http.RoundTripper
	rate   float64
	mu     sync.Mutex
	rnd    *rand.Rand
	counts [faultKinds]atomic.Int64
	calls  atomic.Int64
}

func newFaulty(next http.RoundTripper, rate float64, seed uint64) *faulty {
	return &faulty{next: next, rate: rate, rnd: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// injected is the number of faults injected so far.
func (f *faulty) injected() int64 {
	var n int64
	for i := range f.counts {
		n += f.counts[i].Load()
	}
	return n
}

func (f *faulty) summary() string {
	var parts []string
	for i, name := range faultNames {
		parts = append(parts, name+"="+strconv.FormatInt(f.counts[i].Load(), 10))
	}
	return strings.Join(parts, " ")
}

func (f *faulty) pick() (fault, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.rnd.Float64() >= f.rate {
		return 0, false
	}
	return fault(f.rnd.IntN(int(faultKinds))), true
}

func (f *faulty) RoundTrip(r *http.Request) (*http.Response, error) {
	f.calls.Add(1)
	kind, ok := f.pick()
	if !ok {
		return f.next.RoundTrip(r)
	}
	f.counts[kind].Add(1)
	dynamo := r.Header.Get("X-Amz-Target") != ""
	switch kind {
	case throttled:
		drain(r)
		if dynamo {
			return jsonError(r, http.StatusBadRequest, "ProvisionedThroughputExceededException"), nil
		}
		return xmlError(r, http.StatusServiceUnavailable, "SlowDown"), nil
	case serverErr:
		drain(r)
		if dynamo {
			return jsonError(r, http.StatusInternalServerError, "InternalServerError"), nil
		}
		return xmlError(r, http.StatusInternalServerError, "InternalError"), nil
	case hang:
		drain(r)
		<-r.Context().Done()
		return nil, r.Context().Err()
	case dropBefore:
		drain(r)
		return nil, reset()
	default: // dropAfter
		resp, err := f.next.RoundTrip(r)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		return nil, reset()
	}
}

func drain(r *http.Request) {
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
}

// reset is the error a read on a connection the peer reset returns.
func reset() error {
	return &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
}

func jsonError(r *http.Request, status int, code string) *http.Response {
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#` + code + `","message":"injected fault"}`
	resp := response(r, status, "application/x-amz-json-1.0", body)
	// DynamoDB checksums every response body; the SDK checks it.
	resp.Header.Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE([]byte(body))), 10))
	return resp
}

func xmlError(r *http.Request, status int, code string) *http.Response {
	body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + code + `</Code><Message>injected fault</Message><RequestId>fault</RequestId></Error>`
	return response(r, status, "application/xml", body)
}

func response(r *http.Request, status int, contentType, body string) *http.Response {
	return &http.Response{
		Status: http.StatusText(status), StatusCode: status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {contentType}, "X-Amzn-Requestid": {"fault"}, "Date": {time.Now().UTC().Format(http.TimeFormat)}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}
}

// deadline gives every request the deadline Lambda would (through the edge),
// so that backend calls that never end are cut off and answered with a 504.
func deadline(h http.Handler, budget time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), budget)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}
