package inventory

import (
	"fmt"
	"io"
)

// A report object is read as a stream, but what it expands to is the
// sender's to choose: a megabyte of gzip can hold a gigabyte. The plan step
// holds one observation per entry (and one scan of the fleet), so the
// entries it may hold follow from the function's memory, and the bytes it
// may read follow from the entries (docs/behaviour.md "How large a report
// may be").
const (
	// MachinesPerMB is how many machines a report may name per MB of the
	// function's memory: the plan step of a complete report of 100,000
	// machines peaked at 369 MB of 512 MB (BENCHMARKS.md, "Machine
	// reports"), so 512 MB carries about 130,000, and 1,024 MB about
	// 250,000. The ratio is measured from the template's 512 MB up; below
	// it the runtime's own 25 MB weighs more, and at 128 MB a report at its
	// bound ran the fleet's scan into its timeouts.
	MachinesPerMB = 250
	// BytesPerMachine is what an entry may take on average, decompressed:
	// an entry as schedulers send it is 150 to 250 bytes, attributes and
	// resources included, and a report at the bound of entries this size
	// still fits (BENCHMARKS.md, "Report bounds": 405 MB at 512 MB).
	BytesPerMachine = 1 << 10
	// MaxValueBytes bounds what is held of one value of a report object (an
	// entry, or a member the report does not use) with the space before it.
	// An entry larger than a DynamoDB item is skipped and counted; one
	// larger than this is read past without being held, and skipped too
	// (values). A run of space longer than this refuses the report.
	MaxValueBytes = 4 << 20
	// DefaultMemoryMB is the function's memory when the environment does
	// not say (AWS_LAMBDA_FUNCTION_MEMORY_SIZE): the template's MemorySize.
	DefaultMemoryMB = 512
)

// Bound is what one report object may expand to.
type Bound struct {
	MemoryMB int   // the function's memory it was derived from
	Entries  int   // machine entries
	Bytes    int64 // bytes, decompressed
}

// BoundFor returns the bound of a function of memoryMB.
func BoundFor(memoryMB int) Bound {
	entries := MachinesPerMB * memoryMB
	return Bound{MemoryMB: memoryMB, Entries: entries, Bytes: int64(entries) * BytesPerMachine}
}

// TooLargeError refuses a report object over its Bound. Its type name is
// the error Step Functions sees (errorType): ReportStateMachine does not
// retry it, since the object will not shrink.
type TooLargeError struct {
	Key   string // the report object
	What  string // what it holds too many of
	Limit int64
	Bound Bound
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("machine report %s is refused: it holds more than %d %s, the most InventoryFunction reads at %d MB "+
		"(at most %d machines and %d MB decompressed, at most %d MB of space in a row; docs/behaviour.md \"How large a report may be\")",
		e.Key, e.Limit, e.What, e.Bound.MemoryMB, e.Bound.Entries, e.Bound.Bytes>>20, MaxValueBytes>>20)
}

// boundedReader hands the reader of a report object at most max bytes.
type boundedReader struct {
	r   io.Reader
	max int64
	n   int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n > b.max {
		return 0, &TooLargeError{What: "bytes decompressed", Limit: b.max}
	}
	if rest := b.max + 1 - b.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := b.r.Read(p)
	b.n += int64(n)
	return n, err
}
