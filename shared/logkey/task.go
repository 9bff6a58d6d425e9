package logkey

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/fleetops/fleet/shared/fault"
)

// maxIDLen bounds every id in bytes; no real id comes near it.
const maxIDLen = 512

// Task is a parsed task id:
// <requestId>-<deployId>-<startedAt>-<instanceNo>-<host>-<rackId>.
type Task struct {
	ID         string // the id as given
	RequestID  string // may contain '-'
	DeployID   string
	StartedAt  int64 // epoch ms
	InstanceNo int
	Host       string
	RackID     string
}

// ParseTaskID parses a task id (docs/behaviour.md "Task logs"): split on '-', the last five parts
// are deployId, startedAt, instanceNo, host and rackId, and the rest is the
// requestId. Every part must be non-empty, the numbers plain decimal digits,
// and the whole id a valid id (see CheckRequestID). Otherwise it returns
// fault.Invalid "<id> is not a valid task id".
func ParseTaskID(id string) (Task, error) {
	t, ok := parseTask(id)
	if !ok {
		return Task{}, fault.Invalid("%s is not a valid task id", id)
	}
	return t, nil
}

// parseTask is ParseTaskID without the error, and without allocating: a
// key's parse tries every length of the task id (Parse), and each try
// that built an error, or split the id, cost allocations per log listed.
// The parts are cut at the id's last five '-', as splitting on every '-'
// and joining the rest back would.
func parseTask(id string) (Task, bool) {
	var cut [5]int // the last five '-', left to right
	end := len(id)
	for i := len(cut) - 1; i >= 0; i-- {
		if end = strings.LastIndexByte(id[:end], '-'); end < 0 {
			return Task{}, false
		}
		cut[i] = end
	}
	// After the cut, which refuses most of a parse's tries at once.
	if !validID(id) {
		return Task{}, false
	}
	t := Task{
		ID:        id,
		RequestID: id[:cut[0]],
		DeployID:  id[cut[0]+1 : cut[1]],
		Host:      id[cut[3]+1 : cut[4]],
		RackID:    id[cut[4]+1:],
	}
	if t.RequestID == "" || t.DeployID == "" || t.Host == "" || t.RackID == "" {
		return Task{}, false
	}
	started, err1 := parseDigits(id[cut[1]+1:cut[2]], 63)
	instance, err2 := parseDigits(id[cut[2]+1:cut[3]], strconv.IntSize-1)
	if err1 != nil || err2 != nil {
		return Task{}, false
	}
	t.StartedAt, t.InstanceNo = int64(started), int(instance)
	return t, true
}

// parseDigits parses a non-negative decimal of at most bits bits; unlike
// strconv it refuses signs, so an id has one spelling per number.
func parseDigits(s string, bits int) (uint64, error) {
	if s == "" || strings.TrimLeft(s, "0123456789") != "" {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseUint(s, 10, bits)
}

// CheckRequestID returns fault.Invalid "<id> is not a valid request id" unless
// id is valid. Ids end up inside key prefixes, so an id that could widen or
// escape a prefix is refused: empty, longer than 512 bytes, not UTF-8, or
// containing '/', '%', '\', "..", white space or control characters. Other
// characters, '-' and non-ASCII letters included, are fine.
func CheckRequestID(id string) error {
	if !validID(id) {
		return fault.Invalid("%s is not a valid request id", id)
	}
	return nil
}

// CheckDeployID returns fault.Invalid "<id> is not a valid deploy id" unless
// id is valid as a request id and has no '-', which would make the task ids
// of its deploy ambiguous.
func CheckDeployID(id string) error {
	if !validDeployID(id) {
		return fault.Invalid("%s is not a valid deploy id", id)
	}
	return nil
}

func validDeployID(id string) bool { return validID(id) && !strings.Contains(id, "-") }

func validID(id string) bool {
	if id == "" || len(id) > maxIDLen || !utf8.ValidString(id) ||
		strings.ContainsAny(id, `/%\`) || strings.Contains(id, "..") {
		return false
	}
	return !strings.ContainsFunc(id, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
}
