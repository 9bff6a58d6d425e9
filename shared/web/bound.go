package web

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"errors"
	"mime"
	"net/http"
	"sort"
	"strings"
	"sync"

	"github.com/fleetops/fleet/shared/payload"
)

// Budget is the most bytes the body of an answer of Wrap takes in Lambda's
// proxy envelope (payload.BodySize of what is sent: the base64 of a gzip
// body, the JSON string of any other). No stored data can make a route
// answer more: a larger JSON array is cut to the longest prefix of its
// elements that fits, and any other larger body becomes a JSON 500.
//
// Lambda refuses a response payload over payload.Limit, counting the whole
// envelope, and API Gateway then answers a 502 that is not JSON. What the
// envelope holds beside the body (status, flags, and the headers, which a
// REST API answer lists twice) comes to under 1 KB for every answer of this
// service; envelopeRoom keeps 64 KiB for it, a margin that costs 1% of the
// limit and leaves room for headers added later.
const Budget = payload.Limit - envelopeRoom

const envelopeRoom = 64 << 10

// The headers of an answer that Wrap cut to fit Budget. They are absent
// from every answer that holds all the handler answered.
const (
	// TruncatedHeader is "true" on a JSON array cut to fit Budget.
	TruncatedHeader = "X-Result-Truncated"
	// CountHeader is the number of elements the cut array holds.
	CountHeader = "X-Result-Count"
	// TotalHeader is the number of elements the handler answered.
	TotalHeader = "X-Total-Count"
)

// maxGzip is the largest gzip body whose base64 fits in Budget.
const maxGzip = Budget / 4 * 3

// fitted is a body ready to be sent within Budget.
type fitted struct {
	body        []byte
	gzip        bool // body is gzip-compressed
	cut         bool // body holds the first kept of total elements
	kept, total int
}

// fit returns what to send for a body answered with status: the body, or
// its gzip form when gz (the client accepts gzip and the body is worth
// compressing), whichever fits in Budget, preferring gzip. A successful
// JSON array that fits in neither is cut to the longest prefix of its
// elements that fits, in the form that keeps more (gzip when both keep as
// many). Any other body that does not fit is not sent (false), and its
// size in the envelope is returned.
func fit(h http.Header, status int, body []byte, gz bool) (fitted, int, bool) {
	read := 0 // of the body, when its gzip form passed maxGzip
	if gz {
		z, n, ok := compress(maxGzip, body, nil)
		if ok {
			return fitted{body: z, gzip: true}, 0, true
		}
		read = n
	}
	// No byte takes more than 6 in a JSON string, nor in base64.
	if len(body) <= Budget/6 {
		return fitted{body: body}, 0, true
	}
	size := payload.BodySize(h, body)
	if size <= Budget {
		return fitted{body: body}, 0, true
	}
	if status < 200 || status > 299 || !isJSON(h) {
		return fitted{}, size, false
	}
	a, ok := parseArray(body)
	if !ok {
		return fitted{}, size, false
	}
	best := a.plainPrefix(h)
	if gz {
		if z := a.gzipPrefix(read); z.kept >= best.kept {
			best = z
		}
	}
	best.cut, best.total = true, len(a.ends)
	return best, size, true
}

func isJSON(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}

// array is a JSON array body split into its top-level elements: body[:open]
// is everything up to the opening bracket, element i ends at ends[i] (just
// past its last byte), and the bytes between two elements hold the comma.
// An answer held as elements has no body: elems encodes it again, and size
// is its length.
type array struct {
	body  []byte
	elems elements
	open  int
	ends  []int
	size  int
}

// parseArray splits body, or reports that it is not an array. It trusts
// body to be JSON (handlers write it with JSON) and only tracks strings and
// nesting.
func parseArray(body []byte) (array, bool) {
	i := skipSpace(body, 0)
	if i == len(body) || body[i] != '[' {
		return array{}, false
	}
	a := array{body: body, open: i + 1, size: len(body)}
	depth, inString, escaped := 0, false, false
	last := -1 // offset past the last byte of the current element; -1 before one starts
	for i++; i < len(body); i++ {
		c := body[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
				last = i + 1
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 { // the array's own closing bracket
				if last >= 0 {
					a.ends = append(a.ends, last)
				}
				return a, skipSpace(body, i+1) == len(body)
			}
			depth--
		case ',':
			if depth == 0 {
				if last < 0 {
					return array{}, false
				}
				a.ends = append(a.ends, last)
				last = -1
				continue
			}
		}
		last = i + 1
	}
	return array{}, false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// head returns the bytes up to the end of element k-1 (up to the opening
// bracket for k = 0): with a closing bracket, the array of the first k
// elements.
func (a array) head(k int) []byte {
	return a.body[:a.headSize(k)]
}

// headSize is the length of head(k).
func (a array) headSize(k int) int {
	if k == 0 {
		return a.open
	}
	return a.ends[k-1]
}

// compressHead returns the gzip form of the array of the first k elements,
// or nil when it is longer than limit.
func (a array) compressHead(limit, k int) []byte {
	c := newCompressor(limit)
	defer c.release()
	var err error
	if a.elems != nil {
		err = writeHead(c, a.elems, k)
	} else {
		_, err = c.Write(a.head(k))
	}
	if err != nil {
		return nil
	}
	out, _ := c.finish(closing)
	return out
}

// next returns the bytes that extend head(k) to head(k+1).
func (a array) next(k int) []byte {
	return a.body[len(a.head(k)):a.ends[k]]
}

var opening, closing = []byte("["), []byte("]")

// prefix returns the array of the first k elements, in a new slice.
func (a array) prefix(k int) []byte {
	h := a.head(k)
	return append(h[:len(h):len(h)], closing...)
}

// plainPrefix returns the longest prefix of elements whose uncompressed
// body fits. A JSON string grows by a fixed amount per character, so the
// size of a prefix is the sum of the sizes of its pieces.
func (a array) plainPrefix(h http.Header) fitted {
	k := 0
	if payload.Base64(h, a.body) {
		k = sort.Search(len(a.ends), func(i int) bool { return payload.BodySize(h, a.prefix(i+1)) > Budget })
	} else {
		size := payload.StringSize(a.head(0)) + 1 // and the closing bracket
		for ; k < len(a.ends); k++ {
			if size += payload.StringSize(a.next(k)); size > Budget {
				break
			}
		}
	}
	out := a.prefix(k)
	// A prefix of a body that is not UTF-8 may be UTF-8, and so carried
	// otherwise; measure what is sent.
	for k > 0 && payload.BodySize(h, out) > Budget {
		k--
		out = a.prefix(k)
	}
	return fitted{body: out, kept: k}
}

// gzipPrefix returns the longest prefix of elements whose gzip form fits,
// and that form, in a few compressions. Compressed sizes grow almost in
// proportion to the bytes compressed, so each probe compresses the prefix
// where the sizes already known say the limit lies: on the straight line
// through the two nearest sizes around it, or, while only the size below
// it is known exactly, at that size's ratio. When two probes in a row did
// not halve the range, the next one halves it.
//
// read is how far the compression of the whole body had read when its
// output passed the limit. A prefix that holds those bytes is compressed
// in the same chunks up to there, so it is too large as well; and the
// compressor's output trails what it has read by about a block, so the
// first probe ends two chunks before read.
func (a array) gzipPrefix(read int) fitted {
	type known struct{ k, raw, z int } // prefix of k elements, raw and gzip sizes
	best := a.compressHead(maxGzip, 0)
	lo := known{0, a.open + 1, len(best)}
	hi := known{len(a.ends), a.size, maxGzip + 1}
	if r := sort.Search(len(a.ends), func(i int) bool { return a.ends[i] >= read }); r < len(a.ends) {
		hi = known{r + 1, a.ends[r] + 1, maxGzip + 1}
	}
	exact := false // whether hi.z is a size rather than a bound
	// within is the number of elements of the longest prefix of at most raw bytes.
	within := func(raw int) int {
		return sort.Search(len(a.ends), func(i int) bool { return a.ends[i]+1 > raw })
	}
	m, slow := within(read-2*compressChunk), 0
	for hi.k-lo.k > 1 {
		width := hi.k - lo.k
		m = min(max(m, lo.k+1), hi.k-1)
		raw := a.headSize(m) + 1
		// Past twice the limit a size only needs to be known as large.
		z := a.compressHead(2*maxGzip, m)
		if size := cmp.Or(len(z), 2*maxGzip); size <= maxGzip {
			lo, best = known{m, raw, size}, z
		} else {
			hi, exact = known{m, raw, size}, true
		}
		if slow++; hi.k-lo.k <= width/2 {
			slow = 0
		}
		switch {
		case slow == 2:
			m, slow = lo.k+(hi.k-lo.k)/2, 0
		case exact:
			m = within(lo.raw + (maxGzip-lo.z)*(hi.raw-lo.raw)/(hi.z-lo.z))
		default:
			m = within(lo.raw + (maxGzip-lo.z)*lo.raw/lo.z)
		}
	}
	return fitted{body: best, gzip: true, kept: lo.k}
}

// compressChunk is how much a compressor is handed at a time.
const compressChunk = 64 << 10

// compress returns the gzip form of data followed by tail, or false as
// soon as it is longer than limit, with how much of data it had read then.
func compress(limit int, data, tail []byte) ([]byte, int, bool) {
	c := newCompressor(limit)
	defer c.release()
	c.Write(data)
	out, ok := c.finish(tail)
	return out, c.read, ok
}

// compressor gzips what is written to it, handing it over compressChunk
// bytes at a time, and fails once its output is longer than limit. It then
// knows how much it had read: up to the end of the chunk it failed in. The
// chunks start at the first byte written, whatever the sizes of the writes,
// so a body written piece by piece fails where the whole body would.
type compressor struct {
	zw     *gzip.Writer
	out    capped
	chunk  []byte
	read   int
	failed bool
}

func newCompressor(limit int) *compressor {
	c := &compressor{zw: gzips.Get().(*gzip.Writer), out: capped{limit: limit}, chunk: make([]byte, 0, compressChunk)}
	c.zw.Reset(&c.out)
	return c
}

// Write fails with errOverLimit once the output is longer than the limit.
func (c *compressor) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 && !c.failed {
		k := copy(c.chunk[len(c.chunk):cap(c.chunk)], p)
		c.chunk, p = c.chunk[:len(c.chunk)+k], p[k:]
		if len(c.chunk) == cap(c.chunk) {
			c.hand()
		}
	}
	if c.failed {
		return 0, errOverLimit
	}
	return n, nil
}

// hand compresses the chunk.
func (c *compressor) hand() {
	if c.failed || len(c.chunk) == 0 {
		return
	}
	c.read += len(c.chunk)
	_, err := c.zw.Write(c.chunk)
	c.failed = err != nil
	c.chunk = c.chunk[:0]
}

// finish compresses what is left and then tail, and returns the gzip form
// of all of it, or false when that is longer than the limit.
func (c *compressor) finish(tail []byte) ([]byte, bool) {
	c.hand()
	if c.failed {
		return nil, false
	}
	if _, err := c.zw.Write(tail); err != nil || c.zw.Close() != nil {
		c.failed = true
		return nil, false
	}
	return c.out.buf.Bytes(), true
}

func (c *compressor) release() { gzips.Put(c.zw) }

var errOverLimit = errors.New("over the limit")

// capped collects at most limit bytes, and fails a write past them.
type capped struct {
	buf   bytes.Buffer
	limit int
}

func (c *capped) Write(p []byte) (int, error) {
	if c.buf.Len()+len(p) > c.limit {
		return 0, errOverLimit
	}
	return c.buf.Write(p)
}

// gzips keeps compressors for reuse: a new one costs more than compressing
// a typical response (about 1 MB of tables and half a millisecond).
var gzips = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed)
	return w
}}
