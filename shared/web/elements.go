package web

import (
	"encoding"
	"encoding/json"
	"io"
	"net/http"
	"reflect"

	"github.com/fleetops/fleet/shared/payload"
)

// elements is a JSON array answer held as its elements rather than its
// bytes (see JSON): Wrap encodes them when it sends the answer, and again
// for the prefixes it tries when the answer must be cut. A list of 100,000
// slaves is then never held as one 40 MB body, nor as its 1.5 MB gzip form
// beside that body; see docs/decisions.md.
type elements interface {
	Len() int
	// appendElement appends the JSON encoding of element i to dst.
	appendElement(dst []byte, i int) ([]byte, error)
}

// elementsOf returns v's elements when json.Marshal would write v as the
// JSON array of their encodings: a non-nil slice whose type has no encoding
// of its own and is not bytes (which JSON writes as base64).
func elementsOf(v any) (elements, bool) {
	if raws, ok := v.([]json.RawMessage); ok && raws != nil {
		return rawElements(raws), true
	}
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Slice || rv.IsNil() {
		return nil, false
	}
	t := rv.Type()
	if t.Elem().Kind() == reflect.Uint8 || t.Implements(jsonMarshaler) || t.Implements(textMarshaler) {
		return nil, false
	}
	return reflected{rv}, true
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// reflected is a slice of any element type, each encoded by json.Marshal.
type reflected struct{ slice reflect.Value }

func (r reflected) Len() int { return r.slice.Len() }

func (r reflected) appendElement(dst []byte, i int) ([]byte, error) {
	// Through a pointer, as json.Marshal reaches a slice's elements: a
	// MarshalJSON method on the pointer is then called too.
	b, err := json.Marshal(r.slice.Index(i).Addr().Interface())
	return append(dst, b...), err
}

// rawElements are elements the route encoded itself (with encoding/json),
// written as they are.
type rawElements []json.RawMessage

func (r rawElements) Len() int { return len(r) }

func (r rawElements) appendElement(dst []byte, i int) ([]byte, error) {
	return append(dst, r[i]...), nil
}

// writeHead writes the array up to element m, excluded (head(m) of the
// array's body), to w.
func writeHead(w io.Writer, elems elements, m int) error {
	buf := []byte{'['}
	for i := range m {
		if i > 0 {
			buf = append(buf, ',')
		}
		var err error
		if buf, err = elems.appendElement(buf, i); err != nil {
			return err
		}
		if len(buf) >= compressChunk {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	_, err := w.Write(buf)
	return err
}

// fitElements is fit for an answer held as elements: it answers exactly
// what fit answers for the body json.Marshal would have written, without
// that body. It encodes the elements once, compressing them as it goes when
// the client accepts gzip and keeping no more of the uncompressed array than
// fits in Budget; only an answer cut in its gzip form encodes prefixes of
// them again (gzipPrefix). An element that cannot be encoded is its error.
func fitElements(h http.Header, status int, elems elements, acceptsGzip bool) (fitted, int, bool, error) {
	if payload.Base64(h, []byte("[]")) {
		// A body carried as base64 is measured whole; no route answers
		// one as elements.
		body, err := writeAll(elems)
		if err != nil {
			return fitted{}, 0, false, err
		}
		out, size, ok := fit(h, status, body, acceptsGzip && len(body) >= minGzip)
		return out, size, ok, nil
	}
	n := elems.Len()
	a := array{elems: elems, open: 1, ends: make([]int, n)}
	// The compressor starts once the array is worth compressing (minGzip),
	// from what plain holds by then: everything so far, since a body that
	// short is far within Budget. A short array never pays for one.
	var z *compressor
	canGzip := acceptsGzip && h.Get("Content-Encoding") == ""
	defer func() {
		if z != nil {
			z.release()
		}
	}()
	plain := append([]byte(nil), opening...)
	// size is the whole body's in the envelope, and kept how many elements
	// fit there with the closing bracket.
	size, kept, within := payload.StringSize(opening)+len(closing), 0, true
	var piece []byte
	raw := len(opening)
	for i := range n {
		piece = piece[:0]
		if i > 0 {
			piece = append(piece, ',')
		}
		var err error
		if piece, err = elems.appendElement(piece, i); err != nil {
			return fitted{}, 0, false, err
		}
		if z == nil && canGzip && raw+len(piece)+len(closing) >= minGzip {
			z = newCompressor(maxGzip)
			z.Write(plain)
		}
		raw += len(piece)
		a.ends[i] = raw
		size += payload.StringSize(piece)
		if within = within && size <= Budget; within {
			plain = append(plain, piece...)
			kept++
		}
		if z != nil {
			z.Write(piece)
		}
	}
	a.size = raw + len(closing)
	gz := z != nil && a.size >= minGzip
	read := 0
	if gz {
		z.Write(closing)
		body, ok := z.finish(nil)
		if ok {
			return fitted{body: body, gzip: true}, 0, true, nil
		}
		read = z.read
	}
	if within {
		return fitted{body: append(plain, closing...)}, 0, true, nil
	}
	if status < 200 || status > 299 {
		return fitted{}, size, false, nil
	}
	best := fitted{body: append(plain, closing...), kept: kept}
	if gz {
		if z := a.gzipPrefix(read); z.kept >= best.kept {
			best = z
		}
	}
	best.cut, best.total = true, n
	return best, size, true, nil
}

// writeAll returns the body json.Marshal would have written.
func writeAll(elems elements) ([]byte, error) {
	body := append([]byte(nil), opening...)
	for i := range elems.Len() {
		if i > 0 {
			body = append(body, ',')
		}
		var err error
		if body, err = elems.appendElement(body, i); err != nil {
			return nil, err
		}
	}
	return append(body, closing...), nil
}
