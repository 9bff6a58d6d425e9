package exactjson_test

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fleetops/fleet/shared/exactjson"
)

// change stands in for a change request body.
type change struct {
	Message        *string `json:"message,omitempty"`
	DurationMillis *int64  `json:"durationMillis,omitempty"`
	RevertToState  *string `json:"revertToState,omitempty"`
}

type inner struct {
	Name string `json:"name"`
	Kind string `json:"kind,omitempty"`
}

type outer struct {
	Message        string              `json:"message"`
	DurationMillis *int64              `json:"durationMillis"`
	Child          inner               `json:"child"`
	Ptr            *inner              `json:"ptr"`
	PtrPtr         **inner             `json:"ptrPtr"`
	Children       []inner             `json:"children"`
	Pointers       []*inner            `json:"pointers"`
	Pair           [2]inner            `json:"pair"`
	ByName         map[string]inner    `json:"byName"`
	ByNum          map[int]*inner      `json:"byNum"`
	Nested         [][]inner           `json:"nested"`
	Labels         map[string]string   `json:"labels"`
	Lists          map[string][]string `json:"lists"`
	Deep           map[string][]inner  `json:"deep"`
	Raw            json.RawMessage     `json:"raw"`
	Any            any                 `json:"any"`
	Custom         shout               `json:"custom"`
	When           time.Time           `json:"when"`
	Quoted         int64               `json:"quoted,string"`
	Untagged       string              // bound by its Go name
	//lint:ignore SA5008 the tag names the field "-", as encoding/json reads it
	Dash   string `json:"-,"`
	Hidden string `json:"-"`
	//lint:ignore SA5008 an invalid tag name, which encoding/json ignores for the Go name
	Bad      string                `json:"a\"b"`
	Objects  map[string]any        `json:"objects"`
	Embedded map[string]*outer     `json:"embedded,omitempty"`
	Inline   struct{ Name string } `json:"inline"`
}

// shout decodes itself: it sees its JSON exactly as sent.
type shout struct{ raw string }

func (s *shout) UnmarshalJSON(b []byte) error {
	s.raw = string(b)
	return nil
}

// Embedding: fields promote, the shallowest name wins, a tag wins over no
// tag, and two equal candidates hide the name.
type base struct {
	ID     string `json:"id"`
	Region string `json:"region"`
	Zone   string
}

type Other struct {
	Region string `json:"region"`
	Zone   string `json:"zone"`
}

type embedder struct {
	base
	*Other
	ID string `json:"id"`
}

func ptr[T any](v T) *T { return &v }

func TestUnmarshalBindsOnlyExactNames(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want change
	}{
		{"an exact name binds", `{"message":"real"}`, change{Message: ptr("real")}},
		{"an upper-case duplicate after the real field cannot override it", `{"message":"real","MESSAGE":"shadow"}`, change{Message: ptr("real")}},
		{"an upper-case duplicate before the real field cannot override it", `{"MESSAGE":"shadow","message":"real"}`, change{Message: ptr("real")}},
		{"an upper-case name alone is unknown", `{"DURATIONMILLIS":5000}`, change{}},
		{"a capitalized name alone is unknown", `{"DurationMillis":5000,"RevertToState":"ACTIVE"}`, change{}},
		{"a mixed-case name is unknown", `{"mEsSaGe":"x"}`, change{}},
		{"an escaped long s does not fold to s", `{"revertToState":"ACTIVE","revertTo\u017ftate":"x"}`, change{RevertToState: ptr("ACTIVE")}},
		{"the long s does not fold to s", `{"meſſage":"x"}`, change{}},
		{"an escaped key is read before matching", `{"mess\u0061ge":"escaped"}`, change{Message: ptr("escaped")}},
		{"an escaped upper-case key is unknown", `{"message":"real","MESS\u0041GE":"x"}`, change{Message: ptr("real")}},
		{"an exact duplicate keeps the last value, as encoding/json does", `{"message":"a","message":"b"}`, change{Message: ptr("b")}},
		{"unknown fields of every shape are ignored", `{"x":{"message":"no"},"y":[1,{"a":"}"}],"z":null,"message":"yes","w":"\"}"}`, change{Message: ptr("yes")}},
		{"null is no change", `null`, change{}},
		{"an empty object is no change", `{}`, change{}},
		{"every member unknown leaves nothing", `{ "A" : 1 , "B" : [2] , "MESSAGE" : "x" }`, change{}},
		{"a dropped member between two kept ones", `{"message":"m","MESSAGE":"x","durationMillis":7}`, change{Message: ptr("m"), DurationMillis: ptr[int64](7)}},
		{"whitespace and newlines around dropped members", "{\n\t\"message\" : \"m\" ,\n\t\"Message\" : \"x\" ,\n\t\"X\" : 1\n}", change{Message: ptr("m")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got change
			if err := exactjson.Unmarshal([]byte(tt.in), &got); err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %s, want %s", show(got), show(tt.want))
			}
		})
	}
}

func TestUnmarshalAppliesTheRuleAtEveryDepth(t *testing.T) {
	in := `{
		"child": {"name": "c", "NAME": "x", "Kind": "x", "\u212aind": "the Kelvin sign"},
		"CHILD": {"name": "x"},
		"ptr": {"NAME": "x", "name": "p"},
		"ptrPtr": {"name": "pp", "Name": "x"},
		"children": [{"name": "a", "NAME": "x"}, {"Name": "x"}],
		"pointers": [{"name": "b", "NAME": "x"}, null],
		"pair": [{"NAME": "x", "name": "0"}, {"name": "1"}, {"name": "past the end"}],
		"byName": {"Key": {"name": "k", "NAME": "x"}, "KEY": {"Name": "x"}},
		"byNum": {"7": {"NAME": "x", "name": "seven"}},
		"nested": [[{"name": "n", "NAME": "x"}]],
		"labels": {"Message": "a", "MESSAGE": "b", "message": "c"},
		"lists": {"Team": ["x"], "TEAM": ["y"]},
		"deep": {"Zone": [{"name": "d", "NAME": "x"}]},
		"raw": {"MESSAGE": 1, "message": 2},
		"any": {"NAME": "kept", "list": [{"Name": "kept too"}]},
		"custom": {"SHOUT": true},
		"when": "2026-11-22T10:00:00Z",
		"quoted": "42",
		"Untagged": "u", "untagged": "x", "UNTAGGED": "x",
		"-": "dash",
		"Hidden": "x", "hidden": "x",
		"Bad": "bad", "a\"b": "x",
		"objects": {"Any": {"NAME": 1}},
		"inline": {"Name": "i", "name": "x"}
	}`
	var got outer
	if err := exactjson.Unmarshal([]byte(in), &got); err != nil {
		t.Fatalf("got error %v, want none", err)
	}
	want := outer{
		Child:    inner{Name: "c"},
		Ptr:      &inner{Name: "p"},
		PtrPtr:   ptr(&inner{Name: "pp"}),
		Children: []inner{{Name: "a"}, {}},
		Pointers: []*inner{{Name: "b"}, nil},
		Pair:     [2]inner{{Name: "0"}, {Name: "1"}},
		ByName:   map[string]inner{"Key": {Name: "k"}, "KEY": {}},
		ByNum:    map[int]*inner{7: {Name: "seven"}},
		Nested:   [][]inner{{{Name: "n"}}},
		Labels:   map[string]string{"Message": "a", "MESSAGE": "b", "message": "c"},
		Lists:    map[string][]string{"Team": {"x"}, "TEAM": {"y"}},
		Deep:     map[string][]inner{"Zone": {{Name: "d"}}},
		Raw:      json.RawMessage(`{"MESSAGE": 1, "message": 2}`),
		Any:      map[string]any{"NAME": "kept", "list": []any{map[string]any{"Name": "kept too"}}},
		Custom:   shout{raw: `{"SHOUT": true}`},
		When:     time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		Quoted:   42,
		Untagged: "u",
		Dash:     "dash",
		Bad:      "bad",
		Objects:  map[string]any{"Any": map[string]any{"NAME": 1.0}},
		Inline:   struct{ Name string }{Name: "i"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %s,\nwant %s", show(got), show(want))
	}
}

func TestUnmarshalChoosesEmbeddedFieldsAsEncodingJSONDoes(t *testing.T) {
	tests := []struct {
		name, in string
		want     embedder
	}{
		{"the outer id hides the embedded one", `{"id":"outer"}`, embedder{ID: "outer"}},
		{"two tagged regions at one depth hide the name", `{"region":"r"}`, embedder{}},
		{"a promoted tagged name binds through an embedded pointer", `{"zone":"z"}`, embedder{Other: &Other{Zone: "z"}}},
		{"a promoted untagged name binds by its Go name", `{"Zone":"z"}`, embedder{base: base{Zone: "z"}}},
		{"the promoted names bind apart", `{"ZONE":"x","Zone":"a","zone":"b","id":"i","ID":"x"}`, embedder{base: base{Zone: "a"}, Other: &Other{Zone: "b"}, ID: "i"}},
		{"an upper-case id reaches nothing", `{"ID":"x","Id":"y"}`, embedder{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got embedder
			if err := exactjson.Unmarshal([]byte(tt.in), &got); err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			var std embedder
			if err := json.Unmarshal([]byte(tt.in), &std); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %s, want %s (encoding/json: %s)", show(got), show(tt.want), show(std))
			}
		})
	}
}

func TestUnmarshalDecodesIntoWhatIsAlreadyThere(t *testing.T) {
	t.Run("an interface holding a pointer decodes into its struct", func(t *testing.T) {
		var got any = &inner{}
		if err := exactjson.Unmarshal([]byte(`{"name":"n","NAME":"x"}`), &got); err != nil {
			t.Fatal(err)
		}
		if in, ok := got.(*inner); !ok || in.Name != "n" {
			t.Errorf("got %s, want &{n}", show(got))
		}
	})
	t.Run("a set pointer field keeps its struct", func(t *testing.T) {
		got := outer{Ptr: &inner{Kind: "kept"}}
		if err := exactjson.Unmarshal([]byte(`{"ptr":{"KIND":"x","name":"n"}}`), &got); err != nil {
			t.Fatal(err)
		}
		if *got.Ptr != (inner{Name: "n", Kind: "kept"}) {
			t.Errorf("got %+v, want {n kept}", *got.Ptr)
		}
	})
	t.Run("an interface field holding a pointer decodes into its struct", func(t *testing.T) {
		got := outer{Any: &inner{}}
		if err := exactjson.Unmarshal([]byte(`{"any":{"name":"n","NAME":"x"}}`), &got); err != nil {
			t.Fatal(err)
		}
		if in, ok := got.Any.(*inner); !ok || in.Name != "n" {
			t.Errorf("got %s, want &{n}", show(got.Any))
		}
	})
	t.Run("slice elements within capacity are reused", func(t *testing.T) {
		backing := []*inner{{Kind: "a"}, {Kind: "b"}}
		got := outer{Pointers: backing[:0]}
		if err := exactjson.Unmarshal([]byte(`{"pointers":[{"NAME":"x","name":"0"},{"name":"1","KIND":"x"}]}`), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Pointers) != 2 || *got.Pointers[0] != (inner{Name: "0", Kind: "a"}) || *got.Pointers[1] != (inner{Name: "1", Kind: "b"}) {
			t.Errorf("got %s, want [{0 a} {1 b}]", show(got.Pointers))
		}
	})
}

func TestUnmarshalReturnsTheErrorsOfEncodingJSON(t *testing.T) {
	tests := []struct {
		name string
		in   string
		// same is the input encoding/json must answer with the same error:
		// the input itself, or one whose dropped keys are unknown names of
		// the same length.
		same string
	}{
		{"a wrong type names the field", `{"durationMillis":"soon"}`, ""},
		{"a wrong type after a dropped member keeps its offset", `{"DURATIONMILLIS":"x","durationMillis":"soon"}`, `{"zzzzzzzzzzzzzz":"x","durationMillis":"soon"}`},
		{"a dropped member of the wrong type is no error", `{"DURATIONMILLIS":"soon","message":7}`, `{"zzzzzzzzzzzzzz":"soon","message":7}`},
		{"a nested wrong type names its path", `{"child":{"NAME":1,"name":2}}`, `{"child":{"zzzz":1,"name":2}}`},
		{"truncated JSON is a syntax error", `{"message":`, ""},
		{"trailing data is a syntax error", `{"MESSAGE":"x"} {}`, ""},
		{"an array where an object belongs", `[{"name":1}]`, ""},
		{"a string where an object belongs", `"x"`, ""},
		{"a quoted field holding no number", `{"quoted":"x"}`, ""},
		{"an object where a quoted number belongs", `{"quoted":{"A":1}}`, ""},
		{"an object for a time", `{"when":{"A":1}}`, ""},
		{"nesting beyond encoding/json's depth", strings.Repeat("[", 10001) + strings.Repeat("]", 10001), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			same := tt.same
			if same == "" {
				same = tt.in
			}
			var got, want outer
			gotErr := exactjson.Unmarshal([]byte(tt.in), &got)
			wantErr := json.Unmarshal([]byte(same), &want)
			if gotErr == nil || wantErr == nil {
				if gotErr != nil || wantErr != nil {
					t.Fatalf("got error %v, want %v", gotErr, wantErr)
				}
			} else if !sameError(gotErr, wantErr) {
				t.Errorf("got %T %v, want %T %v", gotErr, describe(gotErr), wantErr, describe(wantErr))
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got %s, want %s", show(got), show(want))
			}
		})
	}
	t.Run("a value that is no pointer is refused as encoding/json refuses it", func(t *testing.T) {
		for _, v := range []any{nil, outer{}, (*outer)(nil)} {
			gotErr, wantErr := exactjson.Unmarshal([]byte(`{}`), v), json.Unmarshal([]byte(`{}`), v)
			var invalid *json.InvalidUnmarshalError
			if !errors.As(gotErr, &invalid) || gotErr.Error() != wantErr.Error() {
				t.Errorf("%T: got %v, want %v", v, gotErr, wantErr)
			}
		}
	})
}

func TestUnmarshalUseNumberKeepsEveryDigit(t *testing.T) {
	var got struct {
		ID    any            `json:"id"`
		Extra map[string]any `json:"extra"`
	}
	in := `{"ID":1,"id":12345678901234567890,"extra":{"N":9007199254740993}}`
	if err := exactjson.UnmarshalUseNumber([]byte(in), &got); err != nil {
		t.Fatal(err)
	}
	if got.ID != json.Number("12345678901234567890") || got.Extra["N"] != json.Number("9007199254740993") {
		t.Errorf("got %#v, want the numbers as written", got)
	}
	for _, in := range []string{``, `{"id":`, `{} {}`} {
		var a, b struct{}
		gotErr, wantErr := exactjson.UnmarshalUseNumber([]byte(in), &a), json.Unmarshal([]byte(in), &b)
		if !sameError(gotErr, wantErr) {
			t.Errorf("%q: got %v, want %v", in, gotErr, wantErr)
		}
	}
}

// sameError reports whether two errors of encoding/json say the same thing
// about the same place.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return reflect.TypeOf(a) == reflect.TypeOf(b) && describe(a) == describe(b)
}

// describe renders an error with the fields its message leaves out.
func describe(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr):
		return typeErr.Error() + " at " + itoa(typeErr.Offset) + " field " + typeErr.Field
	case errors.As(err, &syntaxErr):
		return syntaxErr.Error() + " at " + itoa(syntaxErr.Offset)
	}
	return err.Error()
}

func itoa(n int64) string {
	b, _ := json.Marshal(n)
	return string(b)
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
