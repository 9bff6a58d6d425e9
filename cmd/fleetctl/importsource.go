package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/fleetops/fleet/client"
)

// maxImportHistory is the longest history an import may hold, and the
// most entries one history read answers (docs/behaviour.md "Import").
const maxImportHistory = 10_000

// fromSource builds the import of one slave from the source's answers, as
// the old scheduler's API describes them: its record, its history as the
// history read answers it (newest first) and its expiring record, nil for
// none. It returns the import and the fields of those answers that the
// import does not carry, by path ("slave.typeName", "history[].foo"), each
// once per record. A record that is not a JSON object is an error.
//
// The answers are read as JSON, not only through the client's types, which
// would drop a field they do not know without a word: the import is sent
// as those types, and every field of the answers that the types do not
// hold as it was answered is named. Only the slave's sequence, this
// service's own, goes unnamed.
func fromSource(rawSlave json.RawMessage, rawHistory []json.RawMessage, rawExpiring json.RawMessage) (client.ImportedSlave, []string, error) {
	var imp client.ImportedSlave
	if !isObject(rawSlave) {
		return imp, nil, errors.New("the source's record of the slave is not a JSON object")
	}
	decodeLoosely(rawSlave, &imp.Slave)
	// The old scheduler names a slave's id slaveId.
	var old struct {
		SlaveID string `json:"slaveId"`
	}
	decodeLoosely(rawSlave, &old)
	if imp.Slave.ID == "" {
		imp.Slave.ID = old.SlaveID
	}
	if !draining(imp.Slave.CurrentState.State) {
		// The service keeps a running-task count only while a slave
		// drains: one in any other state is named as dropped.
		imp.Slave.RunningTasks = nil
	}
	imp.Slave.Sequence = 0

	// Each record names a field once, however often it holds it.
	var dropped []string
	record := func() func(string) {
		seen := map[string]bool{}
		return func(path string) {
			if !seen[path] {
				seen[path] = true
				dropped = append(dropped, path)
			}
		}
	}
	drop := record()
	notCarried("slave", decodeAny(rawSlave), encodeAny(imp.Slave), func(path string) {
		switch {
		case path == "slave.sequence":
		case path == "slave.slaveId" && old.SlaveID == imp.Slave.ID:
		default:
			drop(path)
		}
	})
	for _, raw := range rawHistory {
		var u client.StateUpdate
		decodeLoosely(raw, &u)
		imp.History = append(imp.History, u)
		notCarried("history[]", decodeAny(raw), encodeAny(u), record())
	}
	imp.History = oldestFirst(imp.History)

	if len(bytes.TrimSpace(rawExpiring)) > 0 {
		e := &client.Expiring{}
		decodeLoosely(rawExpiring, e)
		if e.Request.RevertToState == "" {
			// The request's revert state may be left out; the service
			// takes the record's, as it must agree with it anyway.
			e.Request.RevertToState = e.RevertToState
		}
		imp.Expiring = e
		notCarried("expiring", decodeAny(rawExpiring), encodeAny(e), record())
	}
	return imp, dropped, nil
}

// oldestFirst puts a history in the order an import takes it. The history
// read answers newest first, and so is reversed; an answer already oldest
// first (its first entry earlier than its last), as an older scheduler may
// give it, is kept as it is.
func oldestFirst(h []client.StateUpdate) []client.StateUpdate {
	if len(h) > 1 && h[0].Timestamp < h[len(h)-1].Timestamp {
		return h
	}
	slices.Reverse(h)
	return h
}

// moved reports whether a slave changed between the read of its record
// and the read of its history: its current state is not its newest entry.
func moved(imp client.ImportedSlave) bool {
	n := len(imp.History)
	return n > 0 && imp.History[n-1] != imp.Slave.CurrentState
}

// notCarried calls drop with the path of every field of raw that sent does
// not hold as it is. Both are JSON decoded by decodeAny. A field that
// carries nothing (null, "", {} or []) is never named.
func notCarried(path string, raw, sent any, drop func(path string)) {
	switch r := raw.(type) {
	case map[string]any:
		s, ok := sent.(map[string]any)
		if !ok {
			drop(path)
			return
		}
		for _, k := range sortedKeys(r) {
			if empty(r[k]) {
				continue
			}
			if _, ok := s[k]; !ok {
				drop(path + "." + k)
				continue
			}
			notCarried(path+"."+k, r[k], s[k], drop)
		}
	case []any:
		s, ok := sent.([]any)
		if !ok || len(s) != len(r) {
			drop(path)
			return
		}
		for i := range r {
			notCarried(path+"[]", r[i], s[i], drop)
		}
	case json.Number:
		if s, ok := sent.(json.Number); !ok || !sameNumber(r, s) {
			drop(path)
		}
	default:
		if raw != sent {
			drop(path)
		}
	}
}

// empty reports a JSON value that carries nothing.
func empty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case string:
		return v == ""
	case map[string]any:
		return len(v) == 0
	case []any:
		return len(v) == 0
	}
	return false
}

// decodeLoosely decodes raw into v as far as it goes: a field of the wrong
// type is left at its zero value (and so named as dropped), the rest is
// decoded. Numbers in open maps (resources) stay json.Number, so that they
// are sent again exactly as written.
func decodeLoosely(raw json.RawMessage, v any) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.Decode(v) // a type error still decodes every other field
}

// decodeAny decodes JSON to maps, slices and json.Number; nil when it is
// not JSON.
func decodeAny(raw []byte) any {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil
	}
	return v
}

// encodeAny is v as JSON, decoded by decodeAny.
func encodeAny(v any) any { return decodeAny(mustJSON(v)) }

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only values decoded from JSON are encoded here.
		panic(err)
	}
	return b
}

// isObject reports whether raw is a JSON object.
func isObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{'
}

// droppedTally counts the fields an import does not carry, by path.
type droppedTally map[string]int

func (t droppedTally) add(paths []string) {
	for _, p := range paths {
		t[p]++
	}
}

// droppedField is one field an import did not carry and on how many of
// the records it was.
type droppedField struct {
	Field string `json:"field"`
	Count int    `json:"count"`
	Of    string `json:"of"` // slaves, entries or expiring changes
}

// fields lists the tally by path.
func (t droppedTally) fields() []droppedField {
	out := []droppedField{}
	for _, p := range sortedKeys(t) {
		of := "slaves"
		switch {
		case strings.HasPrefix(p, "history[]"):
			of = "entries"
		case strings.HasPrefix(p, "expiring"):
			of = "expiring changes"
		}
		out = append(out, droppedField{Field: p, Count: t[p], Of: of})
	}
	return out
}

// String is the field as the summary names it: "slave.typeName on 1,000
// slaves".
func (d droppedField) String() string {
	of := d.Of
	if d.Count == 1 {
		of = map[string]string{"slaves": "slave", "entries": "entry", "expiring changes": "expiring change"}[of]
	}
	return fmt.Sprintf("%s on %s %s", d.Field, thousands(d.Count), of)
}
