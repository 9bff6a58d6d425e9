package exactjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode"
)

// The fuzz targets. Their JSON names differ from one another in more than
// case, so that a key equal to one name never reaches another by folding.

type fuzzLeaf struct {
	Name  string   `json:"name"`
	Count *int64   `json:"count,omitempty"`
	Tags  []string `json:"tags"`
}

type fuzzBase struct {
	Region string `json:"region"`
	Zone   string
}

// fuzzPlain holds only structs, pointers, slices and arrays: every object
// in its JSON is a struct or is skipped, never a map.
type fuzzPlain struct {
	fuzzBase
	Message  string          `json:"message"`
	Duration *int64          `json:"durationMillis,omitempty"`
	Revert   *string         `json:"revertToState,omitempty"`
	Kill     bool            `json:"killTasksOnDecommissionTimeout"`
	Leaf     fuzzLeaf        `json:"leaf"`
	Next     *fuzzPlain      `json:"next"`
	Leaves   []fuzzLeaf      `json:"leaves"`
	Pair     [2]*fuzzLeaf    `json:"pair"`
	Grid     [][]fuzzLeaf    `json:"grid"`
	Quoted   int             `json:"quoted,string"`
	Untagged float64         // its Go name is its JSON name
	Skipped  string          `json:"-"`
	Anon     struct{ X int } `json:"anon"`
}

// fuzzRich adds what holds JSON as data: maps, interfaces, raw messages and
// types that decode themselves.
type fuzzRich struct {
	fuzzPlain
	Labels map[string]string     `json:"labels"`
	Lists  map[string][]string   `json:"lists"`
	ByKey  map[string]*fuzzLeaf  `json:"byKey"`
	ByNum  map[int]fuzzLeaf      `json:"byNum"`
	Raw    json.RawMessage       `json:"raw"`
	Any    any                   `json:"any"`
	AnyPtr any                   `json:"anyPtr"`
	When   *time.Time            `json:"when"`
	Deep   map[string][]fuzzRich `json:"deep"`
}

// fuzzNames are every JSON name of the fuzz targets.
var fuzzNames = []string{
	"region", "Zone", "message", "durationMillis", "revertToState", "killTasksOnDecommissionTimeout",
	"leaf", "next", "leaves", "pair", "grid", "quoted", "Untagged", "anon", "X",
	"name", "count", "tags",
	"labels", "lists", "byKey", "byNum", "raw", "any", "anyPtr", "when", "deep",
}

// fuzzTargets returns new values to decode into: zero ones, and ones that
// already hold pointers, slices and interfaces to decode through.
func fuzzTargets() []any {
	filled := func() *fuzzRich {
		r := &fuzzRich{AnyPtr: &fuzzLeaf{Name: "was"}}
		r.Next = &fuzzPlain{Message: "was"}
		r.Leaves = make([]fuzzLeaf, 1, 3)
		r.Pair[0] = &fuzzLeaf{Tags: []string{"was"}}
		return r
	}
	var anyLeaf any = &fuzzLeaf{}
	return []any{new(fuzzPlain), new(fuzzRich), filled(), &anyLeaf, new([]fuzzPlain), new(map[string]fuzzPlain)}
}

// FuzzUnmarshal checks Unmarshal against encoding/json:
//   - on invalid JSON, both return the same error and change nothing;
//   - on JSON whose keys are all exact names or no name in any case, both
//     decode the same values with the same errors, offsets included;
//   - into a target without maps, decoding is encoding/json's on the same
//     JSON with every key that is not an exact name renamed to an unknown
//     one of the same length: a key in another case is an unknown field;
//   - the JSON encoding/json is given is valid and as long as the input.
func FuzzUnmarshal(f *testing.F) {
	for _, s := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `7`, `{"message":`, `{} {}`, `{"message":"a"}x`,
		`{"message":"real","MESSAGE":"shadow"}`,
		`{"MESSAGE":"shadow","message":"real"}`,
		`{"DURATIONMILLIS":5000}`,
		`{"durationMillis":"soon","DurationMillis":1}`,
		`{"message":"m","durationMillis":60000,"revertToState":"ACTIVE","killTasksOnDecommissionTimeout":true,"actionId":"a"}`,
		`{"leaf":{"name":"n","NAME":"x","count":1,"tags":["a"]},"LEAF":{"name":"y"}}`,
		`{"next":{"next":{"message":"deep","Message":"x"}},"leaves":[{"name":"a"},{"Name":"b"},null],"pair":[{"name":"0"},null,{"name":"2"}]}`,
		`{"grid":[[{"name":"g","nAmE":"x"}],[]],"quoted":"12","QUOTED":"13","Untagged":1.5,"untagged":2,"Skipped":"s","anon":{"X":1,"x":2}}`,
		`{"region":"r","Region":"x","Zone":"z","zone":"x"}`,
		`{"labels":{"Message":"a","MESSAGE":"b"},"lists":{"Team":["x"]},"byKey":{"K":{"name":"k","NAME":"x"}},"byNum":{"1":{"Name":"x"}}}`,
		`{"raw":{"MESSAGE":1},"any":{"MESSAGE":[1,{"A":2}]},"anyPtr":{"name":"p","NAME":"x"},"when":"2026-11-22T10:00:00Z"}`,
		`{"deep":{"k":[{"message":"d","MESSAGE":"x","deep":{"K":[{"LABELS":{}}]}}]}}`,
		`{"mess\u0061ge":"escaped","MESS\u0041GE":"x","me\u017f\u017fage":"long s","\u212aey":"kelvin"}`,
		`[{"message":"a","MESSAGE":"b"},{"Message":"c"}]`,
		`{"a":{"message":"a"},"b":{"MESSAGE":"b"}}`,
		"{ \"message\" : \"m\" ,\n \"X\" : [ 1 , { \"a\" : \"}\\\"\" } ] , \"leaf\" : { } }",
		`{"message":7,"durationMillis":1.5,"leaves":{"name":"n"},"pair":"x","when":{"A":1},"quoted":{"B":1}}`,
		`{"message":"\ud800","name":"\u00e9"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for i := range fuzzTargets() {
			got, want := fuzzTargets()[i], fuzzTargets()[i]
			gotErr := Unmarshal(data, got)
			if !json.Valid(data) {
				wantErr := json.Unmarshal(data, want)
				if !sameError(gotErr, wantErr) || !reflect.DeepEqual(got, want) {
					t.Fatalf("%T: got %v, want %v and no change", got, gotErr, wantErr)
				}
				continue
			}
			cleaned := exact(data, fuzzTargets()[i])
			if !json.Valid(cleaned) || len(cleaned) != len(data) {
				t.Fatalf("%T: %q became %q, want valid JSON of the same length", got, data, cleaned)
			}
			keys, ok := objectKeys(data)
			if !ok {
				t.Fatalf("%q: valid JSON the decoder cannot walk", data)
			}
			if allExactOrUnknown(keys) {
				wantErr := json.Unmarshal(data, want)
				if !sameError(gotErr, wantErr) || !reflect.DeepEqual(got, want) {
					t.Fatalf("%T: exact keys: got %+v (%v), want %+v (%v)", got, got, gotErr, want, wantErr)
				}
			}
			if hasMaps(got) {
				continue
			}
			renamed := bytes.Clone(data)
			for _, k := range keys {
				if !isName(k.text) {
					for j := k.start + 1; j < k.end-1; j++ {
						renamed[j] = '~'
					}
				}
			}
			wantErr := json.Unmarshal(renamed, want)
			if !sameError(gotErr, wantErr) || !reflect.DeepEqual(got, want) {
				t.Fatalf("%T: got %+v (%v), want %+v (%v) as for %q", got, got, gotErr, want, wantErr, renamed)
			}
		}
	})
}

// hasMaps reports whether a target can hold JSON objects as maps.
func hasMaps(v any) bool {
	switch v.(type) {
	case *fuzzPlain, *[]fuzzPlain, *any:
		return false
	}
	return true
}

func isName(key string) bool {
	for _, n := range fuzzNames {
		if key == n {
			return true
		}
	}
	return false
}

// allExactOrUnknown reports whether every key is a name, or differs from
// every name in more than case, however encoding/json or Unicode fold it.
func allExactOrUnknown(keys []key) bool {
	for _, k := range keys {
		if isName(k.text) {
			continue
		}
		for _, n := range fuzzNames {
			if strings.EqualFold(k.text, n) || fold(k.text) == fold(n) {
				return false
			}
		}
	}
	return true
}

// fold maps every rune to the smallest of its case-folding orbit, as
// encoding/json does to match names regardless of case.
func fold(s string) string {
	var b strings.Builder
	for _, r := range s {
		for {
			r2 := unicode.SimpleFold(r)
			if r2 <= r {
				r = r2
				break
			}
			r = r2
		}
		b.WriteRune(r)
	}
	return b.String()
}

// key is an object key: its text, and where its quoted form is in the input.
type key struct {
	text       string
	start, end int
}

// objectKeys lists every object key of valid JSON, found with encoding/json's
// own tokenizer rather than with the walker under test.
func objectKeys(data []byte) ([]key, bool) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber() // a number too large for a float64 is still valid JSON
	type level struct{ object, wantKey bool }
	var stack []level
	var keys []key
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].wantKey = true
		}
	}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return keys, len(stack) == 0
		}
		if err != nil {
			return nil, false
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, level{object: true, wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, level{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
			continue
		}
		if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].wantKey {
			end := int(d.InputOffset())
			keys = append(keys, key{text: tok.(string), start: openingQuote(data, end-1), end: end})
			stack[n-1].wantKey = false
			continue
		}
		valueDone()
	}
}

// openingQuote returns where the string whose closing quote is at end
// starts: at the last quote before it that no backslash escapes.
func openingQuote(data []byte, end int) int {
	for i := end - 1; ; i-- {
		if data[i] != '"' {
			continue
		}
		backslashes := 0
		for j := i - 1; data[j] == '\\'; j-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return i
		}
	}
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if reflect.TypeOf(a) != reflect.TypeOf(b) || a.Error() != b.Error() {
		return false
	}
	var ta, tb *json.UnmarshalTypeError
	if errors.As(a, &ta) && errors.As(b, &tb) {
		return ta.Offset == tb.Offset && ta.Field == tb.Field
	}
	var sa, sb *json.SyntaxError
	if errors.As(a, &sa) && errors.As(b, &sb) {
		return sa.Offset == sb.Offset
	}
	return true
}
