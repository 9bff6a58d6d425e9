package web

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// errAborted is why a streamed answer stopped after its first byte.
var errAborted = errors.New("the answer stopped after its first byte")

// stream writes the held answer to w whole, as it encodes it (see
// Options.Stream): a JSON array element by element, gzipped as it goes when
// the client accepts gzip and the array is worth compressing, never cut and
// never held as one body. It returns the status sent and, when the answer
// failed after its status was sent, why.
//
// A failure before the first byte (an element that cannot be encoded among
// the first minGzip bytes) is still a JSON error. After it, the status can
// no longer change: the answer ends where it failed, without its closing
// bracket (and, gzipped, without gzip's trailer), and the caller aborts the
// response, so that no client takes a part for the whole: a JSON parser
// refuses it and an HTTP client sees the body end early
// (docs/behaviour.md "Answers of any size").
func (b *buffer) stream(w http.ResponseWriter, r *http.Request, acceptsGzip bool) (int, error) {
	status := cmp.Or(b.status, http.StatusOK)
	if b.elements == nil {
		return b.streamBody(w, status, acceptsGzip)
	}
	elems := b.elements
	// The first minGzip bytes decide the encoding: an array shorter than
	// that is sent as it is, exactly as a buffered answer would be.
	head, i, err := append([]byte(nil), opening...), 0, error(nil)
	for ; i < elems.Len() && len(head) < minGzip; i++ {
		if i > 0 {
			head = append(head, ',')
		}
		if head, err = elems.appendElement(head, i); err != nil {
			b.reset()
			Error(b, r, err)
			return b.streamBody(w, b.status, acceptsGzip)
		}
	}
	if i == elems.Len() {
		b.elements, b.body = nil, append(head, closing...)
		return b.streamBody(w, status, acceptsGzip)
	}
	gz := acceptsGzip && b.header.Get("Content-Encoding") == ""
	if gz {
		b.header.Set("Content-Encoding", "gzip")
	}
	b.header.Del("Content-Length")
	w.WriteHeader(status)
	out := newFlushing(w)
	var dst io.Writer = out
	var zw *gzip.Writer
	if gz {
		zw = gzips.Get().(*gzip.Writer)
		defer gzips.Put(zw)
		zw.Reset(out)
		dst = zw
	}
	bw := bufio.NewWriterSize(dst, compressChunk)
	fail := func(err error) (int, error) {
		// What is buffered is sent, up to the element before the failure,
		// so that the client sees where it stopped; the closing bracket
		// and gzip's trailer are not.
		bw.Flush()
		if zw != nil {
			zw.Flush()
		}
		out.flush()
		return status, fmt.Errorf("%w: %w", errAborted, err)
	}
	if _, err := bw.Write(head); err != nil {
		return fail(err)
	}
	piece := head[:0]
	for ; i < elems.Len(); i++ {
		piece = append(piece[:0], ',')
		if piece, err = elems.appendElement(piece, i); err != nil {
			return fail(fmt.Errorf("element %d: %w", i, err))
		}
		if _, err := bw.Write(piece); err != nil {
			return fail(err)
		}
	}
	if _, err := bw.Write(closing); err != nil {
		return fail(err)
	}
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return fail(err)
		}
	}
	if err := out.flush(); err != nil {
		return fail(err)
	}
	return status, nil
}

// streamBody sends a body held whole, gzipped when the client accepts gzip
// and it is worth compressing. Only a JSON array can be long (see JSON);
// every other body is sent as it is.
func (b *buffer) streamBody(w http.ResponseWriter, status int, acceptsGzip bool) (int, error) {
	body := b.body
	if acceptsGzip && len(body) >= minGzip && b.header.Get("Content-Encoding") == "" {
		if z, _, ok := compress(len(body)+len(body)/8+1024, body, nil); ok {
			b.header.Set("Content-Encoding", "gzip")
			b.header.Del("Content-Length")
			body = z
		}
	}
	w.WriteHeader(status)
	if len(body) > 0 {
		if _, err := w.Write(body); err != nil {
			return status, fmt.Errorf("%w: %w", errAborted, err)
		}
	}
	return status, nil
}

// flushing hands what is written to w, and flushes w every compressChunk
// bytes, so that the answer reaches the client as it is encoded rather
// than when the server's own buffer fills, in chunks worth a write.
type flushing struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	pending int // bytes written since the last flush
}

func newFlushing(w http.ResponseWriter) *flushing {
	return &flushing{w: w, rc: http.NewResponseController(w)}
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
