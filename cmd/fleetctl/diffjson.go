package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/fleetops/fleet/internal/termtext"
)

// The comparison of fleetctl diff: answers decoded as JSON (not into the
// client's structs, which would drop a field they do not know) and walked
// side by side.

// absentValue stands for what one side does not have: a field, an entry of
// an array, a record of a list.
type absentValue struct{}

var absent any = absentValue{}

// decodeJSON decodes an answer for comparison, its numbers kept as written.
func decodeJSON(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("the answer is not JSON: %w", err)
	}
	return v, nil
}

// delta is one place where two values differ: its path from their root
// ("currentState.user", "[0].message", "" for the values as a whole) and
// the value on each side, absent when a side has none.
type delta struct {
	path     string
	old, new any
}

// compareJSON returns where old and new differ, objects field by field
// (sorted by name) and arrays entry by entry, leaving out the paths of
// ignore. A field or entry only one side has is a change from or to
// absent; values of different kinds are one change.
func compareJSON(old, new any, ignore ...string) []delta {
	var out []delta
	var walk func(path string, old, new any)
	walk = func(path string, old, new any) {
		if slices.Contains(ignore, path) {
			return
		}
		switch o := old.(type) {
		case map[string]any:
			if n, ok := new.(map[string]any); ok {
				for _, k := range keysOfBoth(o, n) {
					walk(field(path, k), valueOr(o, k), valueOr(n, k))
				}
				return
			}
		case []any:
			if n, ok := new.([]any); ok {
				for i := range max(len(o), len(n)) {
					walk(path+"["+strconv.Itoa(i)+"]", entryOr(o, i), entryOr(n, i))
				}
				return
			}
		}
		if !sameValue(old, new) {
			out = append(out, delta{path, old, new})
		}
	}
	walk("", old, new)
	return out
}

func valueOr(m map[string]any, k string) any {
	if v, ok := m[k]; ok {
		return v
	}
	return absent
}

func entryOr(a []any, i int) any {
	if i < len(a) {
		return a[i]
	}
	return absent
}

var plainName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// field is the path of field k under path: .k, or ["k"] quoted as JSON
// when the name holds anything else, so that no two fields share a path.
func field(path, k string) string {
	if plainName.MatchString(k) {
		if path == "" {
			return k
		}
		return path + "." + k
	}
	quoted, _ := json.Marshal(k)
	return path + "[" + string(quoted) + "]"
}

// under is the path of a value within the entry or field at prefix.
func under(prefix, path string) string {
	if path == "" || strings.HasPrefix(path, "[") {
		return prefix + path
	}
	return prefix + "." + path
}

// sameValue compares two values that are not both objects nor both
// arrays. Numbers compare by value: 16 and 16.0 are one number to a JSON
// reader.
func sameValue(a, b any) bool {
	if x, ok := a.(json.Number); ok {
		y, ok := b.(json.Number)
		return ok && sameNumber(x, y)
	}
	switch a.(type) {
	case map[string]any, []any:
		return false // b is of another kind
	}
	return a == b
}

// sameNumber reports whether two JSON numbers are the same value, however
// written (1000, 1e3 and 1000.0).
func sameNumber(x, y json.Number) bool {
	if x == y {
		return true
	}
	rx, okx := new(big.Rat).SetString(string(x))
	ry, oky := new(big.Rat).SetString(string(y))
	return okx && oky && rx.Cmp(ry) == 0
}

// exactJSON is a value as JSON, exact (for -o json); nil when absent.
func exactJSON(v any) json.RawMessage {
	if v == absent {
		return nil
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage(`null`)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// shown is a value for a terminal: its JSON (strings quoted, so that
// "" and a missing field read apart), control characters escaped, or
// (absent).
func shown(v any) string {
	if v == absent {
		return "(absent)"
	}
	return termtext.Visible(string(exactJSON(v)))
}

// sample picks n of ids (all of them when n is 0 or not below their
// number), sorted: those whose hash with seed ranks lowest. A slave's rank
// depends on its id and the seed alone, so two runs with one seed compare
// the same slaves, whatever else the fleet holds by then.
func sample(ids []string, n int, seed string) []string {
	if n <= 0 || n >= len(ids) {
		return ids
	}
	type ranked struct {
		id, rank string
	}
	all := make([]ranked, len(ids))
	for i, id := range ids {
		sum := sha256.Sum256([]byte(seed + "\x00" + id))
		all[i] = ranked{id, string(sum[:])}
	}
	slices.SortFunc(all, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), strings.Compare(a.id, b.id))
	})
	picked := make([]string, n)
	for i := range picked {
		picked[i] = all[i].id
	}
	slices.Sort(picked)
	return picked
}

// keysOfBoth is every key of a or of b, once each, sorted.
func keysOfBoth(a, b map[string]any) []string {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys
}
