package logkey

// Object is one stored task log, as a listing of a prefix finds it.
type Object struct {
	Bucket       string
	Key          string
	LastModified int64 // epoch ms
	Size         int64 // bytes
}
