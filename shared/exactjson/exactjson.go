// Package exactjson owns how the service reads JSON it is sent: request
// bodies and the events Lambda hands the functions. It decodes exactly as
// encoding/json does, with the same results and the same error types,
// except for one rule: an object key binds to a struct field only when it
// is the field's JSON name (its json tag name, or the Go field name when
// untagged), byte for byte.
//
// encoding/json also binds a key that differs from a name only in case, and
// when both spellings are sent the last one wins, so {"message":"real",
// "MESSAGE":"shadow"} would store "shadow". A client must never reach a
// field under another spelling: here such a key is an unknown field, and
// unknown fields are ignored. Keys of maps are data and stay as sent.
//
// It works in two passes: a walk over the JSON, guided by the Go value it
// is decoded into, blanks every object member whose key names no field of
// the struct it would go into, and encoding/json then decodes what is left.
// Blanked members become spaces rather than being cut out, so every offset
// in an error is the offset in the original input.
package exactjson

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Unmarshal parses data into v as json.Unmarshal does, except that object
// keys bind to struct fields only on an exact match of their JSON names.
// Its errors are those json.Unmarshal returns: *json.SyntaxError,
// *json.UnmarshalTypeError, *json.InvalidUnmarshalError and the errors of
// custom unmarshalers.
func Unmarshal(data []byte, v any) error {
	return json.Unmarshal(exact(data, v), v)
}

// UnmarshalUseNumber is Unmarshal with numbers decoded into interface values
// as json.Number rather than float64, as json.Decoder.UseNumber does, so
// that large numeric ids keep every digit.
func UnmarshalUseNumber(data []byte, v any) error {
	if !json.Valid(data) {
		// A decoder reports some invalid inputs differently (io.EOF for an
		// empty one); Unmarshal's error is the one to give.
		return json.Unmarshal(data, v)
	}
	d := json.NewDecoder(bytes.NewReader(exactValid(data, v)))
	d.UseNumber()
	return d.Decode(v)
}

// exact returns data with every object member blanked whose key would bind
// to a struct field of v only by encoding/json's case folding, or to none.
// It returns data itself when nothing is blanked, and when data is not
// valid JSON, which encoding/json then reports.
func exact(data []byte, v any) []byte {
	if !json.Valid(data) {
		return data
	}
	return exactValid(data, v)
}

// exactValid is exact for data known to be valid JSON.
func exactValid(data []byte, v any) []byte {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return data // encoding/json reports it
	}
	w := walker{data: data}
	w.value(w.space(0), existing(rv))
	if w.out == nil {
		return data
	}
	return w.out
}

// target is the Go value a JSON value decodes into: v when it exists, or
// a new zero value of type t that encoding/json would allocate. readOnly
// says that a new value would be reached through an unexported field,
// where encoding/json does not call custom unmarshalers.
type target struct {
	v        reflect.Value
	t        reflect.Type
	readOnly bool
}

func existing(v reflect.Value) target {
	return target{v: v, t: v.Type(), readOnly: !v.CanInterface()}
}

func fresh(t reflect.Type, readOnly bool) target {
	return target{t: t, readOnly: readOnly}
}

var (
	unmarshalerType     = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// resolve follows pointers and interfaces to the value encoding/json
// decodes an object or array into, as its decoder does. It reports false
// when that value decodes the JSON itself (a custom unmarshaler) or takes
// any JSON (an interface): then the JSON stays as it is.
func (tg target) resolve() (target, bool) {
	// encoding/json looks for methods with pointer receivers on the address
	// of a named value; every value it decodes into is addressable.
	if tg.t.Kind() != reflect.Pointer && tg.t.Name() != "" && custom(reflect.PointerTo(tg.t), tg.readOnly) {
		return tg, false
	}
	for {
		// An interface holding a non-nil pointer is decoded through it.
		if tg.t.Kind() == reflect.Interface && tg.v.IsValid() && !tg.v.IsNil() {
			if e := tg.v.Elem(); e.Kind() == reflect.Pointer && !e.IsNil() {
				tg = target{v: e, t: e.Type(), readOnly: tg.readOnly}
				continue
			}
		}
		if tg.t.Kind() != reflect.Pointer {
			break
		}
		if tg.v.IsValid() && !tg.v.IsNil() && tg.v.Elem().Kind() == reflect.Interface && tg.v.Elem().Elem().Equal(tg.v) {
			return tg, false // an interface holding its own address
		}
		if custom(tg.t, tg.readOnly) {
			return tg, false
		}
		if tg.v.IsValid() && !tg.v.IsNil() {
			tg = target{v: tg.v.Elem(), t: tg.t.Elem(), readOnly: tg.readOnly}
		} else {
			tg = fresh(tg.t.Elem(), tg.readOnly)
		}
	}
	return tg, tg.t.Kind() != reflect.Interface
}

// custom reports whether encoding/json hands a value of pointer type t to
// its own UnmarshalJSON or UnmarshalText.
func custom(t reflect.Type, readOnly bool) bool {
	if t.NumMethod() == 0 || readOnly {
		return false
	}
	return t.Implements(unmarshalerType) || t.Implements(textUnmarshalerType)
}

// walker finds the members to blank in data, which is valid JSON.
type walker struct {
	data []byte
	out  []byte // a copy of data with members blanked; nil until one is
}

func (w *walker) space(i int) int {
	for i < len(w.data) {
		switch w.data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// value walks the value at i into tg and returns where it ends.
func (w *walker) value(i int, tg target) int {
	switch w.data[i] {
	case '{':
		tg, ok := tg.resolve()
		if !ok {
			break
		}
		switch tg.t.Kind() {
		case reflect.Struct:
			fields := fieldsOf(tg.t)
			return w.object(i, func(key string) (target, bool) {
				f, ok := fields[key]
				if !ok {
					return target{}, false
				}
				return f.of(tg), true
			})
		case reflect.Map:
			// A new element for every key: keys are data, never names.
			elem := tg.t.Elem()
			return w.object(i, func(string) (target, bool) { return fresh(elem, false), true })
		}
	case '[':
		tg, ok := tg.resolve()
		if !ok {
			break
		}
		switch tg.t.Kind() {
		case reflect.Slice, reflect.Array:
			return w.array(i, tg)
		}
	}
	return w.skip(i)
}

// member is one key and value of an object.
type member struct {
	start, end int // from the key's opening quote to the value's end
	comma      int // the comma after it, or -1
	keep       bool
}

// object walks the object at i, whose members decode into field(key); a
// key without a field is blanked together with its value.
func (w *walker) object(i int, field func(key string) (target, bool)) int {
	var members []member
	dropped := false
	i = w.space(i + 1)
	for w.data[i] != '}' {
		m := member{start: i, comma: -1}
		keyEnd := w.skipString(i)
		tg, keep := field(w.key(w.data[i:keyEnd]))
		i = w.space(w.space(keyEnd) + 1) // past the colon
		if keep {
			i = w.value(i, tg)
		} else {
			i = w.skip(i)
		}
		m.end, m.keep = i, keep
		dropped = dropped || !keep
		i = w.space(i)
		if w.data[i] == ',' {
			m.comma = i
			i = w.space(i + 1)
		}
		members = append(members, m)
	}
	if dropped {
		w.blank(members)
	}
	return i + 1
}

// blank removes the dropped members of one object, and the commas that
// separated them, leaving one comma between members that stay.
func (w *walker) blank(members []member) {
	if w.out == nil {
		w.out = bytes.Clone(w.data)
	}
	lastKept := -1
	for _, m := range members {
		if !m.keep {
			fill(w.out[m.start:m.end])
		}
		if m.comma >= 0 {
			w.out[m.comma] = ' '
		}
		if m.keep {
			if lastKept >= 0 {
				w.out[lastKept] = ','
			}
			lastKept = m.comma
		}
	}
}

func fill(b []byte) {
	for i := range b {
		b[i] = ' '
	}
}

// key returns the text of a quoted key as encoding/json reads it.
func (w *walker) key(quoted []byte) string {
	raw := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw)
	}
	var s string
	_ = json.Unmarshal(quoted, &s) // valid JSON: escapes and bad UTF-8 are read as encoding/json reads them
	return s
}

// array walks the array at i into the slice or array tg.
func (w *walker) array(i int, tg target) int {
	i = w.space(i + 1)
	for n := 0; w.data[i] != ']'; n++ {
		if el, ok := tg.index(n); ok {
			i = w.value(i, el)
		} else {
			i = w.skip(i)
		}
		i = w.space(i)
		if w.data[i] == ',' {
			i = w.space(i + 1)
		}
	}
	return i + 1
}

// index returns the target of element n. A slice decodes into the
// elements it already has, up to its capacity, and new ones beyond; an
// array ignores elements past its length.
func (tg target) index(n int) (target, bool) {
	if tg.t.Kind() == reflect.Array && n >= tg.t.Len() {
		return target{}, false
	}
	if tg.v.IsValid() {
		v := tg.v
		if v.Kind() == reflect.Slice {
			if n >= v.Cap() {
				return fresh(tg.t.Elem(), tg.readOnly), true
			}
			v = v.Slice(0, v.Cap())
		}
		return existing(v.Index(n)), true
	}
	return fresh(tg.t.Elem(), tg.readOnly), true
}

// skip returns where the value at i ends.
func (w *walker) skip(i int) int {
	switch w.data[i] {
	case '"':
		return w.skipString(i)
	case '{', '[':
		depth := 0
		for {
			switch w.data[i] {
			case '"':
				i = w.skipString(i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	}
	for i < len(w.data) {
		switch w.data[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}

// skipString returns where the string starting at i ends.
func (w *walker) skipString(i int) int {
	for i++; ; i++ {
		switch w.data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// field is a struct field as encoding/json names it: the path of field
// indexes from the struct, through embedded structs.
type field struct {
	index []int
}

// of returns the target of the field in the struct tg.
func (f field) of(tg target) target {
	v, t, readOnly := tg.v, tg.t, tg.readOnly
	for _, i := range f.index {
		if t.Kind() == reflect.Pointer {
			if v.IsValid() && !v.IsNil() {
				v = v.Elem()
			} else {
				v = reflect.Value{}
			}
			t = t.Elem()
		}
		sf := t.Field(i)
		if v.IsValid() {
			v = v.Field(i)
			readOnly = !v.CanInterface()
		} else {
			readOnly = !sf.IsExported()
		}
		t = sf.Type
	}
	if v.IsValid() {
		return existing(v)
	}
	return fresh(t, readOnly)
}

var fieldCache sync.Map // reflect.Type → map[string]field

// fieldsOf returns the fields of struct type t by JSON name, chosen as
// encoding/json chooses them: tags name fields, "-" hides one, embedded
// structs promote theirs, and of several fields with one name the
// shallowest wins, then a tagged one; a tie hides the name.
func fieldsOf(t reflect.Type) map[string]field {
	if f, ok := fieldCache.Load(t); ok {
		return f.(map[string]field)
	}
	f, _ := fieldCache.LoadOrStore(t, typeFields(t))
	return f.(map[string]field)
}

type candidate struct {
	name   string
	tagged bool
	index  []int
}

func typeFields(t reflect.Type) map[string]field {
	type embedded struct {
		t     reflect.Type
		index []int
	}
	var found []candidate
	// Embedded structs are explored a level at a time; count says how
	// often a struct was embedded at the level being explored.
	next := []embedded{{t: t}}
	var count, nextCount map[reflect.Type]int
	visited := map[reflect.Type]bool{}
	for len(next) > 0 {
		var current []embedded
		current, next = next, nil
		count, nextCount = nextCount, map[reflect.Type]int{}
		for _, e := range current {
			if visited[e.t] {
				continue
			}
			visited[e.t] = true
			for i := range e.t.NumField() {
				sf := e.t.Field(i)
				if sf.Anonymous {
					ft := sf.Type
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && ft.Kind() != reflect.Struct {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, _, _ := strings.Cut(tag, ",")
				if !validTag(name) {
					name = ""
				}
				index := append(append([]int(nil), e.index...), i)
				ft := sf.Type
				if ft.Name() == "" && ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if name != "" || !sf.Anonymous || ft.Kind() != reflect.Struct {
					c := candidate{name: name, tagged: name != "", index: index}
					if c.name == "" {
						c.name = sf.Name
					}
					found = append(found, c)
					if count[e.t] > 1 {
						// The same struct embedded twice at this depth: a
						// second copy makes the name ambiguous below.
						found = append(found, c)
					}
					continue
				}
				nextCount[ft]++
				if nextCount[ft] == 1 {
					next = append(next, embedded{t: ft, index: index})
				}
			}
		}
	}
	byName := map[string][]candidate{}
	for _, c := range found {
		byName[c.name] = append(byName[c.name], c)
	}
	fields := make(map[string]field, len(byName))
	for name, cs := range byName {
		if c, ok := dominant(cs); ok {
			fields[name] = field{index: c.index}
		}
	}
	return fields
}

// dominant picks the field that a name means among several: the
// shallowest, then the tagged one; two equal ones cancel out.
func dominant(cs []candidate) (candidate, bool) {
	best := cs[0]
	for _, c := range cs[1:] {
		if len(c.index) < len(best.index) || (len(c.index) == len(best.index) && c.tagged && !best.tagged) {
			best = c
		}
	}
	ties := 0
	for _, c := range cs {
		if len(c.index) == len(best.index) && c.tagged == best.tagged {
			ties++
		}
	}
	return best, ties == 1
}

// validTag reports whether a json tag name is one encoding/json accepts;
// for any other, it uses the Go field name.
func validTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

// ValidText returns an error when a string of data, a key or a value, holds
// text that encoding/json would not read as sent: bytes that are not UTF-8,
// or an escaped surrogate without its pair (\ud800 alone). encoding/json
// reads either as U+FFFD without a word, so a name stored from them would
// not be the one sent. A U+FFFD the sender wrote, as UTF-8 or as \ufffd, is
// text like any other. Only the strings of data are looked at; whether it
// is JSON otherwise is for the decoder to say.
func ValidText(data []byte) error {
	if !utf8.Valid(data) {
		at := 0
		for at < len(data) {
			r, size := utf8.DecodeRune(data[at:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			at += size
		}
		return fmt.Errorf("byte %d is not UTF-8 (0x%02x)", at, data[at])
	}
	// In JSON a backslash appears only in strings, where it starts an escape.
	for i := bytes.IndexByte(data, '\\'); i >= 0; {
		n := 2
		if r, ok := escapedRune(data[i:]); ok && utf16.IsSurrogate(r) {
			next, paired := escapedRune(data[i+6:])
			if r >= 0xdc00 || !paired || next < 0xdc00 || next > 0xdfff {
				return fmt.Errorf("byte %d holds the surrogate %s without its pair", i, data[i:i+6])
			}
			n = 12
		}
		if i+n >= len(data) {
			break
		}
		j := bytes.IndexByte(data[i+n:], '\\')
		if j < 0 {
			break
		}
		i += n + j
	}
	return nil
}

// escapedRune reads the \uXXXX escape b starts with.
func escapedRune(b []byte) (rune, bool) {
	if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case '0' <= c && c <= '9':
			r = r<<4 | rune(c-'0')
		case 'a' <= c && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case 'A' <= c && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
