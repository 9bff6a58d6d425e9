package inventory

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// values reads the JSON values of a report object one at a time, holding
// at most MaxValueBytes of each. encoding/json's Decoder holds a value whole
// before it hands it over, so one entry of 10 MB among 20,000 small ones
// could only refuse the report (or be held whole, a gigabyte for a
// gigabyte); values reads past such an entry instead, keeping only its id,
// so that it is skipped and counted like any other entry whose description
// cannot be stored, and the rest of the report applies (docs/behaviour.md
// "How large a report may be").
//
// It only frames values: what it hands over is parsed by encoding/json,
// which checks it; of an oversized value it checks only that its brackets
// match and its strings close, which is what finding its end takes.
type values struct {
	r     *bufio.Reader
	space int // whitespace read since the last value: it counts toward the next one's bound
}

// oversized is what values keeps of a value larger than MaxValueBytes: its
// size and, for an object, its "id" and "slaveId" members as JSON text when
// they are strings.
type oversized struct {
	size        int64
	id, slaveID json.RawMessage
}

// maxDepth bounds the nesting of an oversized value, whose open brackets
// values holds; encoding/json refuses deeper values too.
const maxDepth = 10000

// maxIDBytes bounds what values keeps of a member of an oversized entry: an
// id longer than any valid one (machine.ValidateID) is cut there, and then
// refused as too long.
const maxIDBytes = 1 << 10

func newValues(r io.Reader) *values { return &values{r: bufio.NewReaderSize(r, 64<<10)} }

// peek returns the next byte that is not whitespace, without reading it;
// io.EOF at the end. More whitespace than MaxValueBytes in a row is
// refused: nothing would be left of the next value's bound.
func (v *values) peek() (byte, error) {
	for {
		c, err := v.r.ReadByte()
		if err != nil {
			return 0, err
		}
		if !isSpace(c) {
			return c, v.r.UnreadByte()
		}
		if v.space++; v.space > MaxValueBytes {
			return 0, &TooLargeError{What: "bytes of space in a row", Limit: MaxValueBytes}
		}
	}
}

// next reads the next byte that is not whitespace.
func (v *values) next() (byte, error) {
	if _, err := v.peek(); err != nil {
		return 0, unexpectedEOF(err)
	}
	v.space = 0
	return v.r.ReadByte()
}

// expect reads the byte want, after whitespace.
func (v *values) expect(want byte) error {
	c, err := v.next()
	if err != nil {
		return err
	}
	if c != want {
		return fmt.Errorf("got %q, want %q", c, want)
	}
	return nil
}

// end checks that nothing but whitespace follows.
func (v *values) end() error {
	switch _, err := v.peek(); {
	case err == io.EOF:
		return nil
	case err != nil:
		return err
	}
	return errors.New("the report is followed by more data")
}

// small reads the next value, which must fit in MaxValueBytes: what is
// named what.
func (v *values) small(what string) (json.RawMessage, error) {
	raw, big, err := v.value()
	if err == nil && big != nil {
		return nil, &TooLargeError{What: "bytes in " + what, Limit: MaxValueBytes}
	}
	return raw, err
}

// value reads the next value: whole when it fits in MaxValueBytes with the
// whitespace before it, else only what oversized keeps of it.
func (v *values) value() (json.RawMessage, *oversized, error) {
	first, err := v.peek()
	if err != nil {
		return nil, nil, unexpectedEOF(err)
	}
	f := frame{n: int64(v.space)}
	v.space = 0
	if first != '"' && first != '{' && first != '[' {
		// A number or a literal ends where a delimiter, or the report, does.
		for {
			c, err := v.r.ReadByte()
			if err == io.EOF {
				break
			}
			if err != nil {
				return nil, nil, err
			}
			if isSpace(c) || c == ',' || c == ']' || c == '}' || c == ':' {
				v.r.UnreadByte()
				break
			}
			f.keep(c)
		}
		if f.buf == nil && f.big == nil {
			return nil, nil, fmt.Errorf("unexpected %q", first)
		}
		return f.result()
	}
	for {
		if f.inString && !f.escaped && v.r.Buffered() > 0 {
			// The bulk of a large value is text: read up to the next quote
			// or backslash at once.
			buffered, _ := v.r.Peek(v.r.Buffered())
			if n := bytes.IndexAny(buffered, `"\`); n != 0 {
				if n < 0 {
					n = len(buffered)
				}
				f.text(buffered[:n])
				v.r.Discard(n)
				continue
			}
		}
		c, err := v.r.ReadByte()
		if err != nil {
			return nil, nil, unexpectedEOF(err)
		}
		done, err := f.add(c)
		if err != nil {
			return nil, nil, err
		}
		if done {
			return f.result()
		}
	}
}

// frame is a value being read: its bytes while they fit, the brackets it
// has open, and the members "id" and "slaveId" when it is an object.
type frame struct {
	buf      []byte
	n        int64      // its bytes, with the whitespace before it
	big      *oversized // once n passes MaxValueBytes
	closers  []byte     // what closes each container open, innermost last
	inString bool
	escaped  bool
	// A string directly in the value (an object) is a key, or a member's
	// value after its ':'.
	str         []byte // the string being read there, up to maxIDBytes
	member      bool   // the string being read there is a member's value
	key         string // the member's key, when it is one kept
	id, slaveID json.RawMessage
}

func (f *frame) keep(c byte) { f.keepAll([]byte{c}) }

func (f *frame) keepAll(b []byte) {
	f.n += int64(len(b))
	if f.big == nil && f.n > MaxValueBytes {
		f.big, f.buf = &oversized{}, nil // the value is skipped: let go of it
	}
	if f.big == nil {
		f.buf = append(f.buf, b...)
	}
}

// text reads b, plain text of the string being read: no quote, no
// backslash.
func (f *frame) text(b []byte) {
	f.keepAll(b)
	if len(f.closers) == 1 && f.closers[0] == '}' && len(f.str) <= maxIDBytes {
		f.str = append(f.str, b[:min(len(b), maxIDBytes+1-len(f.str))]...)
	}
}

// add reads the value's next byte, and reports whether it ended the value.
func (f *frame) add(c byte) (bool, error) {
	f.keep(c)
	top := len(f.closers) == 1 && f.closers[0] == '}'
	if f.inString {
		switch {
		case f.escaped:
			f.escaped = false
		case c == '\\':
			f.escaped = true
		case c == '"':
			f.inString = false
			if top {
				f.endString()
			}
			return len(f.closers) == 0, nil
		}
		if top && len(f.str) <= maxIDBytes {
			f.str = append(f.str, c)
		}
		return false, nil
	}
	switch c {
	case '"':
		f.inString, f.str = true, f.str[:0]
	case '{', '[':
		if len(f.closers) == maxDepth {
			return false, fmt.Errorf("a value nested more than %d deep", maxDepth)
		}
		f.closers = append(f.closers, c+2) // '{'+2 is '}', '['+2 is ']'
	case '}', ']':
		if len(f.closers) == 0 || f.closers[len(f.closers)-1] != c {
			return false, fmt.Errorf("unexpected %q", c)
		}
		f.closers = f.closers[:len(f.closers)-1]
		return len(f.closers) == 0, nil
	case ':':
		f.member = top
	case ',':
		if top {
			f.member, f.key = false, ""
		}
	}
	return false, nil
}

// endString takes note of a string that ended directly in the object.
func (f *frame) endString() {
	quoted := append(append([]byte{'"'}, f.str...), '"')
	switch {
	case !f.member:
		f.key = ""
		if s := string(f.str); s == "id" || s == "slaveId" {
			f.key = s
		}
	case f.key == "id":
		f.id = quoted
	case f.key == "slaveId":
		f.slaveID = quoted
	}
}

func (f *frame) result() (json.RawMessage, *oversized, error) {
	if f.big == nil {
		return f.buf, nil, nil
	}
	f.big.size, f.big.id, f.big.slaveID = f.n, f.id, f.slaveID
	return nil, f.big, nil
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}
