package statemachine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// reconcileDefinition is the shape of the template's ReconcileStateMachine: a
// default prefix, then a Map over the bucket's objects in batches.
func reconcileDefinition(batcher string) map[string]any {
	var def map[string]any
	err := json.Unmarshal([]byte(`{"StartAt":"WithPrefix","States":{
	  "WithPrefix":{"Type":"Choice","Choices":[{"Variable":"$.prefix","IsPresent":true,"Next":"Reconcile"}],"Default":"WholeBucket"},
	  "WholeBucket":{"Type":"Pass","Parameters":{"bucket.$":"$.bucket","prefix":""},"Next":"Reconcile"},
	  "Reconcile":{"Type":"Map","ItemReader":{"Resource":"arn:aws:states:::s3:listObjectsV2","Parameters":{"Bucket.$":"$.bucket","Prefix.$":"$.prefix"}},
	    "ItemBatcher":`+batcher+`,"MaxConcurrency":3,"ToleratedFailurePercentage":0,
	    "ItemProcessor":{"ProcessorConfig":{"Mode":"DISTRIBUTED"},"StartAt":"Batch","States":{"Batch":{"Type":"Task","Resource":"arn:aws:states:::lambda:invoke",
	      "Parameters":{"FunctionName":"Fn","Payload.$":"$"},"OutputPath":"$.Payload","End":true}}},
	    "ResultPath":null,"End":true}}}`), &def)
	if err != nil {
		panic(err)
	}
	return def
}

// bucket is a listing of n objects in pages of 1,000, as S3 gives them;
// lists records each call.
type bucket struct {
	n     int
	mu    sync.Mutex
	lists []string
}

func (b *bucket) list(_ context.Context, name, prefix, token string) ([]any, string, error) {
	b.mu.Lock()
	b.lists = append(b.lists, fmt.Sprintf("%s/%s@%s", name, prefix, token))
	b.mu.Unlock()
	from := 0
	fmt.Sscan(token, &from)
	var items []any
	for i := from; i < min(from+1000, b.n); i++ {
		items = append(items, map[string]any{"Key": fmt.Sprintf("k%05d", i), "Size": 4.0, "LastModified": 1793491200.0, "Etag": `"e"`, "StorageClass": "STANDARD"})
	}
	if from+1000 >= b.n {
		return items, "", nil
	}
	return items, fmt.Sprint(from + 1000), nil
}

// batchesSeen records the batches a machine hands its function.
type batchesSeen struct {
	mu    sync.Mutex
	keys  []string
	sizes []int
	fail  map[string]bool // first keys of the batches that fail
}

func (s *batchesSeen) invoke(_ context.Context, _ string, payload json.RawMessage) (json.RawMessage, error) {
	var b struct {
		BatchInput map[string]string
		Items      []struct{ Key string }
	}
	if err := json.Unmarshal(payload, &b); err != nil {
		return nil, err
	}
	if b.BatchInput["job"] != "reconcile" || b.BatchInput["bucket"] != "logs" {
		return nil, fmt.Errorf("got BatchInput %v, want the job and the execution's bucket", b.BatchInput)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail[b.Items[0].Key] {
		return nil, errors.New("batch failed")
	}
	for _, it := range b.Items {
		s.keys = append(s.keys, it.Key)
	}
	s.sizes = append(s.sizes, len(b.Items))
	return json.RawMessage(fmt.Sprintf(`{"keys":%d}`, len(b.Items))), nil
}

const batcher500 = `{"MaxItemsPerBatch":500,"BatchInput":{"job":"reconcile","bucket.$":"$.bucket"}}`

func TestAMapOverABucketListsEveryPageAndHandsOutBatches(t *testing.T) {
	b := &bucket{n: 2300}
	seen := &batchesSeen{}
	m := &Machine{Definition: reconcileDefinition(batcher500), List: b.list, Invoke: seen.invoke}
	if _, err := m.Run(t.Context(), json.RawMessage(`{"bucket":"logs"}`)); err != nil {
		t.Fatal(err)
	}
	if want := []string{"logs/@", "logs/@1000", "logs/@2000"}; strings.Join(b.lists, " ") != strings.Join(want, " ") {
		t.Errorf("got listings %q, want %q: every page, from the whole bucket", b.lists, want)
	}
	if len(seen.keys) != 2300 || len(seen.sizes) != 5 {
		t.Errorf("got %d keys in %d batches, want 2300 in 5 of at most 500", len(seen.keys), len(seen.sizes))
	}
	once := map[string]bool{}
	for _, k := range seen.keys {
		if once[k] {
			t.Errorf("got %s twice", k)
		}
		once[k] = true
	}
}

func TestABatchStaysWithinMaxInputBytesPerBatch(t *testing.T) {
	b := &bucket{n: 1000}
	seen := &batchesSeen{}
	m := &Machine{Definition: reconcileDefinition(`{"MaxItemsPerBatch":500,"MaxInputBytesPerBatch":10000,"BatchInput":{"job":"reconcile","bucket.$":"$.bucket"}}`),
		List: b.list, Invoke: seen.invoke}
	if _, err := m.Run(t.Context(), json.RawMessage(`{"bucket":"logs","prefix":"k"}`)); err != nil {
		t.Fatal(err)
	}
	items, _, _ := b.list(t.Context(), "logs", "", "")
	item, _ := json.Marshal(items[0])
	most := 10000 / len(item)
	if len(seen.keys) != 1000 || slices.Max(seen.sizes) > most || len(seen.sizes) < 1000/most {
		t.Errorf("got %d keys in batches of %v, want 1000 in batches of at most %d items of %d bytes", len(seen.keys), seen.sizes, most, len(item))
	}
	if b.lists[0] != "logs/k@" {
		t.Errorf("got listing %s, want the execution's prefix", b.lists[0])
	}
}

func TestAnExecutionRunAgainWithItsJournalRerunsOnlyWhatDidNotSucceed(t *testing.T) {
	b := &bucket{n: 2300}
	path := filepath.Join(t.TempDir(), "journal.jsonl")
	seen := &batchesSeen{fail: map[string]bool{"k01000": true}}
	journal, err := OpenJournal(path)
	if err != nil {
		t.Fatal(err)
	}
	m := &Machine{Definition: reconcileDefinition(batcher500), List: b.list, Invoke: seen.invoke, Journal: journal}
	if _, err := m.Run(t.Context(), json.RawMessage(`{"bucket":"logs"}`)); err == nil {
		t.Fatal("got success, want the failed batch to fail the execution")
	}
	journal.Close()
	if len(seen.keys) != 1800 {
		t.Fatalf("got %d keys, want the 4 other batches' 1800", len(seen.keys))
	}

	seen.fail, seen.keys = nil, nil
	if journal, err = OpenJournal(path); err != nil {
		t.Fatal(err)
	}
	defer journal.Close()
	earlier, now := 0, 0
	m = &Machine{Definition: reconcileDefinition(batcher500), List: b.list, Invoke: seen.invoke, Journal: journal,
		ItemDone: func(out any, before bool) {
			if before {
				earlier++
			} else {
				now++
			}
		}}
	if _, err := m.Run(t.Context(), json.RawMessage(`{"bucket":"logs"}`)); err != nil {
		t.Fatal(err)
	}
	if len(seen.keys) != 500 || seen.keys[0] != "k01000" || earlier != 4 || now != 1 {
		t.Errorf("got %d keys from %v on, %d batches done before and %d now; want only the failed batch's 500 run again", len(seen.keys), seen.keys[:1], earlier, now)
	}
}

func TestTheDriverRefusesWhatItDoesNotImplementOfAListingOrABatcher(t *testing.T) {
	for name, c := range map[string]struct{ find, replace string }{
		"a reader config on a listing":  {`"Parameters":{"Bucket.$"`, `"ReaderConfig":{"MaxItems":10},"Parameters":{"Bucket.$"`},
		"a listing with a delimiter":    {`"Prefix.$":"$.prefix"`, `"Prefix.$":"$.prefix","Delimiter":"/"`},
		"a batch size read from a path": {`"MaxItemsPerBatch":500`, `"MaxItemsPerBatchPath":"$.n"`},
		"a pass with a result":          {`"Parameters":{"bucket.$":"$.bucket","prefix":""}`, `"Result":{"prefix":""}`},
	} {
		t.Run(name, func(t *testing.T) {
			raw, _ := json.Marshal(reconcileDefinition(batcher500))
			var def map[string]any
			json.Unmarshal([]byte(strings.Replace(string(raw), c.find, c.replace, 1)), &def)
			seen := &batchesSeen{}
			m := &Machine{Definition: def, List: (&bucket{n: 10}).list, Invoke: seen.invoke}
			if _, err := m.Run(t.Context(), json.RawMessage(`{"bucket":"logs"}`)); err == nil || !strings.Contains(err.Error(), "not supported locally") {
				t.Errorf("got %v, want it refused as not supported locally", err)
			}
			if len(seen.keys) != 0 {
				t.Errorf("got %d keys handed out, want none", len(seen.keys))
			}
		})
	}
}
