package logkey

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/fleetops/fleet/shared/fault"
)

// MaxPrefixes is the most prefixes one lookup may list (docs/behaviour.md "Task logs").
const MaxPrefixes = 2000

// TooManyPrefixes returns the fault.Invalid of a lookup that would list more
// than MaxPrefixes prefixes.
func TooManyPrefixes() error {
	return fault.Invalid("A lookup may cover at most %d prefixes; narrow the time window or name fewer tasks and requests", MaxPrefixes)
}

type level uint8

const (
	requestLevel level = iota
	deployLevel
	taskLevel
)

// Scope is what a lookup knows: a task, a deploy or a request. Build one
// with TaskScope, DeployScope or RequestScope; the zero Scope is a request
// scope without a request id, which Prefixes refuses.
type Scope struct {
	Group string // %group; empty means DefaultGroup
	Tag   string // %tag of task and deploy lookups; empty means unknown, which cuts the format there

	level level
	task  Task // RequestID always, DeployID from deploy level, ID and Host at task level
}

// TaskScope is the scope of one task's logs. Prefixes trusts only t.ID, which
// it parses again.
func TaskScope(t Task) Scope { return Scope{level: taskLevel, task: t} }

// DeployScope is the scope of a deploy's logs.
func DeployScope(requestID, deployID string) Scope {
	return Scope{level: deployLevel, task: Task{RequestID: requestID, DeployID: deployID}}
}

// RequestScope is the scope of a request's logs.
func RequestScope(requestID string) Scope {
	return Scope{level: requestLevel, task: Task{RequestID: requestID}}
}

// check validates the scope's ids and returns it with its task re-parsed.
func (s Scope) check() (Scope, error) {
	var err error
	switch s.level {
	case taskLevel:
		s.task, err = ParseTaskID(s.task.ID)
	case deployLevel:
		if err = CheckRequestID(s.task.RequestID); err == nil {
			err = CheckDeployID(s.task.DeployID)
		}
	default:
		err = CheckRequestID(s.task.RequestID)
	}
	switch {
	case err != nil:
		return s, err
	case s.Group != "" && !validID(s.Group):
		return s, fault.Invalid("%s is not a valid group", s.Group)
	case s.Tag != "" && !validID(s.Tag):
		return s, fault.Invalid("%s is not a valid tag", s.Tag)
	}
	return s, nil
}

// value returns what s writes for the task-level token t, whether it can,
// and whether the format ends right after it.
//
// Below task level, %taskId becomes the start that every task id of the
// request ("<requestId>-") or deploy ("<requestId>-<deployId>-") shares, and
// the rest of the format is dropped. The trailing '-' is a deliberate
// tightening over the old API, which wrote no dash: its lookup of deploy D
// also listed the logs of deploy D2. A request id may itself contain '-', so
// only a format that writes %requestId before %taskId keeps request foo apart
// from request foo-bar.
func (s Scope) value(t token) (v string, ok, last bool) {
	switch t {
	case tokRequestID:
		return s.task.RequestID, true, false
	case tokGroup:
		return orDefault(s.Group), true, false
	case tokDeployID:
		return s.task.DeployID, s.level >= deployLevel, false
	case tokTag:
		return s.Tag, s.Tag != "" && s.level >= deployLevel, false
	case tokHost:
		return s.task.Host, s.level == taskLevel, false
	case tokTaskID:
		switch s.level {
		case taskLevel:
			return s.task.ID, true, false
		case deployLevel:
			return s.task.RequestID + "-" + s.task.DeployID + "-", true, true
		}
		return s.task.RequestID + "-", true, true
	}
	return "", false, false // file-level tokens
}

// fill returns the parts of f up to the first token s cannot fill, with the
// tokens s fills turned into literals and the time tokens kept.
func (f Format) fill(s Scope) []part {
	var out []part
	for _, p := range f.get().parts {
		if p.tok == literal || p.tok.isTime() {
			out = append(out, p)
			continue
		}
		v, ok, last := s.value(p.tok)
		if !ok {
			break
		}
		out = append(out, part{lit: v})
		if last {
			break
		}
	}
	return out
}

// Window is the time range [Start, End) of a lookup, in epoch ms, and the
// rule its logs' spans are measured by: with Plain (excludeMetadata), the
// span ignores the object's metadata, since the caller asked the service
// to read none (docs/behaviour.md "Task logs").
type Window struct {
	Start, End int64
	Plain      bool
}

// Overlaps reports whether a log whose span is [from, until] (Entry.Span)
// belongs to w: it starts before w ends and ends at or after w starts.
func (w Window) Overlaps(from, until int64) bool { return from < w.End && until >= w.Start }

// Holds reports whether e, whose key has the %s time keyTime, belongs to
// w by its span (Entry.Span), without its metadata when w is Plain.
func (w Window) Holds(e Entry, keyTime *int64) bool {
	if w.Plain {
		e.Start, e.End = nil, nil
	}
	return w.Overlaps(e.Span(keyTime))
}

// Reach is the window whose prefixes a lookup over w reads when it is
// answered at now: from w's start to w's end or now, whichever is later.
// A log is keyed by when its file was written, which may be long after its
// span began, so a log that overlaps w may sit under any prefix up to now;
// the prefixes before w's start day are never read (docs/behaviour.md
// "Task logs"). An empty window stays empty.
func Reach(w Window, now int64) Window {
	if w.Start >= w.End {
		return w
	}
	return Window{Start: w.Start, End: max(w.End, now), Plain: w.Plain}
}

// Owns reports whether a key that parsed as p is a log of s: of its task,
// deploy or request, in its group. Prefixes name more than that: a task
// whose id extends another's ("…-rk_b" and "…-rk") lists under its
// prefix, and so may a file no uploader of s wrote.
func (s Scope) Owns(p Parsed) bool {
	if orDefault(p.Group) != orDefault(s.Group) || p.RequestID != s.task.RequestID {
		return false
	}
	switch s.level {
	case taskLevel:
		return p.TaskID == s.task.ID
	case deployLevel:
		return p.DeployID == s.task.DeployID
	}
	return true
}

// Listed reports whether a key of s that parsed as p lies under one of the
// prefixes Prefixes returns for s over reach: its time tokens name a unit
// (the finest in s's prefixes) from the one holding 00:00 UTC of reach's
// start day to one starting before reach's end. A format whose prefixes
// have no time tokens lists every key of s; so, approximately, does one
// without %Y, whose months or days repeat every year.
func (f Format) Listed(s Scope, p Parsed, reach Window) bool {
	unit := literal
	for _, part := range f.fill(s) {
		if part.tok.isTime() && part.tok > unit {
			unit = part.tok
		}
	}
	if !unit.isTime() || p.written[0] < 0 {
		return true
	}
	v := [4]int{p.written[0], 1, 1, 0}
	for i := 1; i <= int(unit-tokYear); i++ {
		if p.written[i] >= 0 {
			v[i] = p.written[i]
		}
	}
	at := time.Date(v[0], time.Month(v[1]), v[2], v[3], 0, 0, 0, time.UTC)
	if at.Year() != v[0] || int(at.Month()) != v[1] || at.Day() != v[2] || at.Hour() != v[3] {
		return false // no walk renders a 13th month or a 31st of June
	}
	start := floor(time.UnixMilli(reach.Start).UTC(), unit)
	return !at.Before(start) && at.Before(time.UnixMilli(reach.End).UTC())
}

// TaskWindow is the window of a task lookup (docs/behaviour.md "Task logs"): from the later of
// start and the task's start, to end or, when end is nil, now. A running
// task writes logs for as long as it runs, and when it ended is not known.
func TaskWindow(t Task, start, end *int64, now int64) Window {
	w := Window{Start: t.StartedAt, End: now}
	if start != nil && *start > w.Start {
		w.Start = *start
	}
	if end != nil {
		w.End = *end
	}
	return w
}

// LookbackWindow is the window of a request or deploy lookup (docs/behaviour.md "Task logs"):
// from start or, when start is nil, lookback before now, to end or now.
func LookbackWindow(start, end *int64, lookback time.Duration, now int64) Window {
	w := Window{Start: now - lookback.Milliseconds(), End: now}
	if lookback > 0 && w.Start > now {
		w.Start = math.MinInt64 // now - lookback overflowed
	}
	if start != nil {
		w.Start = *start
	}
	if end != nil {
		w.End = *end
	}
	return w
}

// Prefixes returns the key prefixes to list for scope s over window w
// (docs/behaviour.md "Task logs"), sorted and compacted. The format is cut at the first token s
// cannot fill. If what remains has time tokens, there is one prefix per unit
// of the finest of them (hour, day, month or year), from the unit holding
// 00:00 UTC of w's start day while the unit starts before w.End; otherwise
// there is one prefix. An empty window has none.
//
// budget is the number of prefixes the caller can still afford: MaxPrefixes
// for a single lookup, less what earlier scopes used in a search. Beyond it the
// walk stops and Prefixes returns TooManyPrefixes. Time units are counted as
// walked, so a format that repeats (%m without %Y) still counts each month.
// Invalid ids in s give the fault.Invalid of ParseTaskID, CheckRequestID or
// CheckDeployID, or "<group> is not a valid group" ("tag" likewise).
func (f Format) Prefixes(s Scope, w Window, budget int) ([]string, error) {
	s, err := s.check()
	if err != nil {
		return nil, err
	}
	if w.Start >= w.End {
		return nil, nil
	}
	parts := f.fill(s)
	unit := literal
	for _, p := range parts {
		if p.tok.isTime() && p.tok > unit {
			unit = p.tok
		}
	}
	if !unit.isTime() {
		if budget < 1 {
			return nil, TooManyPrefixes()
		}
		return []string{render(parts, time.Time{})}, nil
	}
	// Times stay time.Time, which spans far more than int64 ms, so neither
	// the walk nor its comparison with the end can overflow.
	end := time.UnixMilli(w.End).UTC()
	var out []string
	for at := floor(time.UnixMilli(w.Start).UTC(), unit); at.Before(end); at = step(at, unit) {
		if len(out) >= budget {
			return nil, TooManyPrefixes()
		}
		out = append(out, render(parts, at))
	}
	return Compact(out), nil
}

// floor returns the start of the first unit to walk: 00:00 of at's day for
// hours and days, and the first day of its month or year for months and
// years, so that a window starting on the 31st still covers the next month.
func floor(at time.Time, unit token) time.Time {
	y, m, d := at.Date()
	switch unit {
	case tokYear:
		m, d = time.January, 1
	case tokMonth:
		d = 1
	}
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// step returns the start of the unit after at. Month and year steps start
// from the first day, where AddDate cannot overflow into a later month.
func step(at time.Time, unit token) time.Time {
	switch unit {
	case tokHour:
		return at.Add(time.Hour)
	case tokDay:
		return at.AddDate(0, 0, 1)
	case tokMonth:
		return at.AddDate(0, 1, 0)
	}
	return at.AddDate(1, 0, 0)
}

// render writes parts holding only literals and time tokens.
func render(parts []part, at time.Time) string {
	var b strings.Builder
	for _, p := range parts {
		if p.tok == literal {
			b.WriteString(p.lit)
		} else {
			b.WriteString(timeValue(p.tok, at))
		}
	}
	return b.String()
}

// Compact returns prefixes sorted, without duplicates and without any prefix
// that extends another one in the list: listing the shorter one already
// returns every key of the longer.
func Compact(prefixes []string) []string {
	sorted := slices.Sorted(slices.Values(prefixes))
	out := sorted[:0]
	for _, p := range sorted {
		// Sorted, the strings that extend p follow p directly, so comparing
		// with the last one kept is enough.
		if len(out) > 0 && strings.HasPrefix(p, out[len(out)-1]) {
			continue
		}
		out = append(out, p)
	}
	return out
}

// Allow applies a task lookup's allowlist (docs/behaviour.md "Task logs"): it keeps the prefixes
// that start with an allowlist entry. An empty allowlist keeps prefixes as
// they are.
func Allow(prefixes, allowlist []string) []string {
	if len(allowlist) == 0 {
		return prefixes
	}
	var out []string
	for _, p := range prefixes {
		if slices.ContainsFunc(allowlist, func(a string) bool { return strings.HasPrefix(p, a) }) {
			out = append(out, p)
		}
	}
	return out
}
