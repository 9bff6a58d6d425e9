package logkey

// Object is one stored task log, as a listing of a prefix finds it.
type Object struct {
	Bucket       string
	Key          string
	LastModified int64 // epoch ms
	Size         int64 // bytes
}

// Entry is a stored log with the start and end times (epoch ms) its
// uploader set in the object's metadata, nil when absent.
type Entry struct {
	Object
	Start, End *int64
}

// Span is the time e covers (docs/behaviour.md "Task logs"): from its start
// time, or else keyTime (the %s time its key was written with, nil when the
// key has none), or else its last modification; to its end time, or else
// its last modification. A span given backwards is turned around.
func (e Entry) Span(keyTime *int64) (from, until int64) {
	from, until = e.LastModified, e.LastModified
	switch {
	case e.Start != nil:
		from = *e.Start
	case keyTime != nil:
		from = *keyTime
	}
	if e.End != nil {
		until = *e.End
	}
	return min(from, until), max(from, until)
}
