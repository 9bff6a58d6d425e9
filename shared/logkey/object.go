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
