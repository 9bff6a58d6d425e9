package logkey

import "testing"

func TestSpanFallsBackOnTheKeyTimeThenTheLastModification(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	for _, c := range []struct {
		name              string
		e                 Entry
		keyTime           *int64
		wantFrom, wantEnd int64
	}{
		{"metadata", Entry{Object: Object{LastModified: 50}, Start: n(10), End: n(20)}, n(30), 10, 20},
		{"start from the key", Entry{Object: Object{LastModified: 50}, End: n(40)}, n(30), 30, 40},
		{"end from the last modification", Entry{Object: Object{LastModified: 50}}, n(30), 30, 50},
		{"nothing but the last modification", Entry{Object: Object{LastModified: 50}}, nil, 50, 50},
		{"backwards", Entry{Object: Object{LastModified: 50}, Start: n(60), End: n(20)}, nil, 20, 60},
	} {
		from, until := c.e.Span(c.keyTime)
		if from != c.wantFrom || until != c.wantEnd {
			t.Errorf("%s: span [%d, %d], want [%d, %d]", c.name, from, until, c.wantFrom, c.wantEnd)
		}
	}
}

func TestWindowHoldsTheLogsWhoseSpanOverlapsIt(t *testing.T) {
	w := Window{Start: 100, End: 200}
	for _, c := range []struct {
		from, until int64
		want        bool
	}{
		{0, 99, false}, {0, 100, true}, {150, 160, true}, {199, 300, true}, {200, 300, false}, {0, 1000, true},
	} {
		if got := w.Overlaps(c.from, c.until); got != c.want {
			t.Errorf("[%d, %d] in [100, 200): %v, want %v", c.from, c.until, got, c.want)
		}
	}
}

// keyTime is the %s time f parsed from key: nil when f has no %s or did
// not write key.
func keyTime(f Format, key string) *int64 {
	p, ok := f.Parse(key)
	if !ok {
		return nil
	}
	return p.Time
}

func TestAKeysTimeIsTheMillisecondsItWasWrittenWith(t *testing.T) {
	key := "web-api/2026/11/web-api-v1-1793491200000-0-h1-r1_0-1793494800000-stdout"
	if got := keyTime(Format{}, key); got == nil || *got != 1793494800000 {
		t.Errorf("KeyTime(%q) = %v, want 1793494800000", key, got)
	}
	if got := keyTime(Format{}, "web-api/not-a-log"); got != nil {
		t.Errorf("KeyTime of a key the format did not write = %d, want nil", *got)
	}
	f, err := ParseFormat("%requestId/%taskId/%filename")
	if err != nil {
		t.Fatal(err)
	}
	if got := keyTime(f, "web-api/web-api-v1-1793491200000-0-h1-r1/stdout"); got != nil {
		t.Errorf("KeyTime without %%s = %d, want nil", *got)
	}
}

func TestAPlainWindowMeasuresSpansWithoutMetadata(t *testing.T) {
	n := func(v int64) *int64 { return &v }
	e := Entry{Object: Object{LastModified: 500}, Start: n(100), End: n(150)}
	for _, c := range []struct {
		name string
		w    Window
		want bool
	}{
		{"metadata: inside its start and end", Window{Start: 120, End: 130}, true},
		{"plain: before its key time", Window{Start: 120, End: 130, Plain: true}, false},
		{"metadata: after its end", Window{Start: 400, End: 450}, false},
		{"plain: between its key time and its last modification", Window{Start: 400, End: 450, Plain: true}, true},
	} {
		if got := c.w.Holds(e, n(300)); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
}
