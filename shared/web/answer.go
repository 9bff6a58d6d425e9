package web

import (
	"bufio"
	"compress/gzip"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sync"
)

// answer is the one writer of every answer Wrap serves. It holds what a
// handler writes until it has minGzip bytes, which decide the encoding:
// gzip when the client accepts it and the answer names no encoding of its
// own, as it is otherwise. It then sends the status and headers and hands
// every later write on as it comes, compressed or not, flushing every
// compressChunk bytes, so that a client receives a long answer as it is
// encoded and nothing holds it whole. An answer shorter than minGzip is
// sent as it is when the handler returns.
//
// Until the status is sent the answer can still become another (reset):
// a handler that fails, or panics, answers a JSON error. After it, the
// status cannot change: an answer that fails then ends where it failed,
// without its closing bracket (and, gzipped, without gzip's trailer), and
// Wrap aborts the response, so that no client takes a part for the whole
// (docs/behaviour.md "Answers of any size").
type answer struct {
	w      http.ResponseWriter
	gzipOK bool // the client accepts gzip
	status int
	held   []byte
	sent   bool // the status and headers are sent
	out    *flushing
	zw     *gzip.Writer
	dst    io.Writer // where writes go once sent: zw, or out
	err    error     // the first write that failed once sent
}

func (a *answer) Header() http.Header { return a.w.Header() }

func (a *answer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *answer) Write(p []byte) (int, error) {
	a.WriteHeader(http.StatusOK)
	if !a.sent {
		a.held = append(a.held, p...)
		if len(a.held) >= minGzip {
			a.send(true)
		}
		return len(p), a.err
	}
	if a.err != nil {
		return 0, a.err
	}
	n, err := a.dst.Write(p)
	a.fail(err)
	return n, a.err
}

// send sends the status, the headers and what is held; long says that the
// answer holds at least minGzip bytes, and so is worth compressing.
func (a *answer) send(long bool) {
	a.sent = true
	h := a.w.Header()
	a.out = &flushing{w: a.w, rc: http.NewResponseController(a.w)}
	a.dst = a.out
	if long && a.gzipOK && h.Get("Content-Encoding") == "" {
		h.Set("Content-Encoding", "gzip")
		h.Del("Content-Length")
		a.zw = gzips.Get().(*gzip.Writer)
		a.zw.Reset(a.out)
		a.dst = a.zw
	}
	a.w.WriteHeader(a.status)
	held := a.held
	a.held = nil
	if len(held) == 0 {
		return
	}
	_, err := a.dst.Write(held)
	a.fail(err)
}

// FlushError sends what the answer holds now, for an answer written over
// time (a stream of changes), so that what is written reaches the client
// without waiting for more: an answer flushed before minGzip bytes is sent
// as it is, uncompressed.
func (a *answer) FlushError() error {
	if !a.sent {
		a.WriteHeader(http.StatusOK)
		a.send(false)
	}
	if a.zw != nil {
		a.fail(a.zw.Flush())
	}
	a.fail(a.out.flush())
	return a.err
}

// reset drops what the answer holds, so that another can be written
// instead, and reports whether it could: not once the status is sent.
func (a *answer) reset() bool {
	if a.sent {
		return false
	}
	a.status, a.held = 0, nil
	return true
}

// finish sends an answer still held, or ends one under way, and returns
// why the answer is not whole, if it is not.
func (a *answer) finish() error {
	if !a.sent {
		a.WriteHeader(http.StatusOK)
		a.send(false)
	}
	if a.zw != nil {
		a.fail(a.zw.Close())
		gzips.Put(a.zw)
		a.zw = nil
	}
	a.fail(a.out.flush())
	return a.err
}

// fail keeps the first write that failed once the answer was sent.
func (a *answer) fail(err error) {
	if err != nil && a.err == nil {
		a.err = fmt.Errorf("%w: %w", errAborted, err)
	}
}

// abandon sends what is compressed so far, without gzip's trailer, so that
// the client sees where an answer that cannot be finished stopped.
func (a *answer) abandon() {
	if a.zw != nil {
		a.zw.Flush()
		gzips.Put(a.zw)
		a.zw = nil
	}
	a.out.flush()
}

// errAborted is why an answer stopped after its first byte.
var errAborted = errors.New("the answer stopped after its first byte")

// minGzip is the smallest answer worth compressing: below it, gzip's header
// outweighs the gain.
const minGzip = 4 << 10

// compressChunk is how many bytes go to the client at a time.
const compressChunk = 64 << 10

// gzips keeps compressors for reuse: a new one costs more than compressing
// a typical answer.
var gzips = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}

// flushing hands what is written to w, and flushes w every compressChunk
// bytes, so that the answer reaches the client as it is encoded rather
// than when the server's own buffer fills, in chunks worth a write.
type flushing struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	pending int // bytes written since the last flush
}

func (f *flushing) Write(p []byte) (int, error) {
	n, err := f.w.Write(p)
	if err != nil {
		return n, err
	}
	if f.pending += n; f.pending >= compressChunk {
		return n, f.flush()
	}
	return n, nil
}

// flush flushes w; a writer that cannot flush sends as it is written.
func (f *flushing) flush() error {
	f.pending = 0
	if err := f.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// writeArray writes v, a slice json.Marshal would write as the JSON array
// of its elements' encodings, to w element by element, so that a long list
// is never held as one body: a list of 100,000 slaves is 40 MB of JSON. An
// element json.Marshal cannot encode is a bug of the route's types (a NaN,
// a channel): writeArray panics with its error, which Wrap answers as any
// panic.
func writeArray(w io.Writer, elems reflect.Value) {
	bw := arrayBuffers.Get().(*bufio.Writer)
	bw.Reset(w)
	defer func() {
		bw.Reset(nil) // holds no writer of a finished answer
		arrayBuffers.Put(bw)
	}()
	bw.WriteByte('[')
	for i := range elems.Len() {
		if i > 0 {
			bw.WriteByte(',')
		}
		if err := appendElement(bw, elems.Index(i)); err != nil {
			panic(fmt.Errorf("element %d: %w", i, err))
		}
	}
	bw.WriteByte(']')
	bw.Flush()
}

// arrayBuffers keeps writeArray's buffers for reuse: one of compressChunk
// bytes a list was most of what a small list allocated, in bytes, and of
// the collector's work.
var arrayBuffers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, compressChunk) }}

// appendElement writes the JSON encoding of e to bw: a json.RawMessage as
// it is, anything else through a pointer, as json.Marshal reaches a
// slice's elements (a MarshalJSON method on the pointer is then called).
func appendElement(bw *bufio.Writer, e reflect.Value) error {
	if raw, ok := e.Interface().(json.RawMessage); ok {
		_, err := bw.Write(raw)
		return err
	}
	b, err := json.Marshal(e.Addr().Interface())
	if err != nil {
		return err
	}
	_, err = bw.Write(b)
	return err
}

// arrayOf returns v as a slice to write element by element when json.Marshal
// would write it as the JSON array of its elements' encodings: a non-nil
// slice whose type has no encoding of its own and is not bytes (which JSON
// writes as base64).
func arrayOf(v any) (reflect.Value, bool) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice || rv.IsNil() {
		return rv, false
	}
	t := rv.Type()
	if t.Elem().Kind() == reflect.Uint8 || t.Implements(jsonMarshaler) || t.Implements(textMarshaler) {
		return rv, false
	}
	return rv, true
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)
