package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// The old scheduler's answers, recorded in testdata/oldscheduler as it
// gives them: slaves.json (GET /api/slaves/), expiring.json (GET
// /api/slaves/expiring) and history/<id>.json (GET /api/slaves/slave/{id},
// newest first). Its records carry fields this service does not keep
// (typeName, a history entry's previousState, resources as a list of Mesos
// resources), lack optional ones (rackId, attributes, user, message), and
// hold states this service never writes (MISSING_ON_STARTUP).
const oldSchedulerDir = "testdata/oldscheduler"

// oldSchedulerAnswers reads the recorded answers: the list, its slaves'
// ids in its order, each one's history by id, and the expiring changes.
func oldSchedulerAnswers(t *testing.T) (list []json.RawMessage, ids []string, history map[string][]json.RawMessage, expiring []json.RawMessage) {
	t.Helper()
	read := func(name string, v any) {
		t.Helper()
		raw, err := os.ReadFile(filepath.Join(oldSchedulerDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	read("slaves.json", &list)
	read("expiring.json", &expiring)
	history = map[string][]json.RawMessage{}
	for _, raw := range list {
		id := slaveID(raw)
		ids = append(ids, id)
		var h []json.RawMessage
		read(filepath.Join("history", id+".json"), &h)
		history[id] = h
	}
	return list, ids, history, expiring
}

// oldScheduler is a server answering as the old scheduler did, from the
// recorded answers.
type oldScheduler struct {
	*httptest.Server
	mu sync.Mutex
	// After holdAfter history reads, a history read waits until release
	// is closed or its client goes away; 0 holds none.
	holdAfter, reads int
	release          chan struct{}
	// changed answers these paths otherwise than recorded, as a source
	// changed since.
	changed map[string]any
}

func newOldScheduler(t *testing.T) *oldScheduler {
	t.Helper()
	list, ids, history, expiring := oldSchedulerAnswers(t)
	o := &oldScheduler{release: make(chan struct{}), changed: map[string]any{}}
	details := map[string]json.RawMessage{}
	for i, id := range ids {
		details[id] = list[i]
	}
	answer := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	mux := http.NewServeMux()
	changed := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			o.mu.Lock()
			v, ok := o.changed[r.URL.Path]
			o.mu.Unlock()
			if ok {
				answer(w, v)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
	mux.HandleFunc("GET /api/slaves/{$}", func(w http.ResponseWriter, r *http.Request) { answer(w, list) })
	mux.HandleFunc("GET /api/slaves/expiring", func(w http.ResponseWriter, r *http.Request) { answer(w, expiring) })
	mux.HandleFunc("GET /api/slaves/slave/{id}/details", func(w http.ResponseWriter, r *http.Request) {
		d, ok := details[r.PathValue("id")]
		if !ok {
			http.Error(w, `{"code":404,"message":"no such slave"}`, http.StatusNotFound)
			return
		}
		answer(w, d)
	})
	mux.HandleFunc("GET /api/slaves/slave/{id}", func(w http.ResponseWriter, r *http.Request) {
		o.mu.Lock()
		o.reads++
		hold := o.holdAfter > 0 && o.reads > o.holdAfter
		release := o.release
		o.mu.Unlock()
		if hold {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
		}
		// An unknown slave has an empty history, as the API answers.
		h := history[r.PathValue("id")]
		if h == nil {
			h = []json.RawMessage{}
		}
		answer(w, h)
	})
	o.Server = httptest.NewServer(changed(mux))
	t.Cleanup(func() {
		o.Release()
		o.Close()
	})
	return o
}

// Change answers path with v from now on, as a source changed since it
// was recorded.
func (o *oldScheduler) Change(path string, v any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.changed[path] = v
}

// Hold makes the history reads after the first n wait for Release.
func (o *oldScheduler) Hold(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.holdAfter, o.reads = n, 0
}

// Release lets every held read go on, and holds none from now on.
func (o *oldScheduler) Release() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.holdAfter > 0 {
		close(o.release)
		o.release = make(chan struct{})
		o.holdAfter = 0
	}
}
