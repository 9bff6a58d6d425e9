package logkey

import (
	"strconv"
	"strings"
)

// Parsed is what a key tells about its log: the ids its format wrote. A
// format without %taskId leaves TaskID empty, one without %deployId (and
// without %taskId) leaves DeployID empty, one without %group leaves Group
// empty, one without %s leaves Time nil.
type Parsed struct {
	TaskID    string
	RequestID string
	DeployID  string
	Group     string
	Time      *int64 // the %s time of the key, nil when the format has none

	// written holds the values of the key's time tokens (%Y %m %d %H, in
	// that order), -1 where the format has none: the prefix the key is
	// listed under (Format.Listed).
	written [4]int
}

// maxParseSteps bounds the work of one Parse: the ids may hold the format's
// literals ('-' and '_' in the default one), so a hostile key could make the
// search try every way of cutting it.
const maxParseSteps = 100_000

// Parse reads key back with f: it finds the values of f's tokens that
// render key, with every id valid (ParseTaskID, CheckRequestID,
// CheckDeployID) and agreeing with the task id (its request, deploy and
// host). When several cuts fit, the one giving the shortest values from the
// left wins, so a file name may hold the format's separators. ok is false
// when no cut fits: the key was not written by f.
func (f Format) Parse(key string) (p Parsed, ok bool) {
	m := matcher{parts: f.get().parts, key: key, vals: map[token]string{}}
	if !m.match(0, 0) {
		return Parsed{}, false
	}
	p = Parsed{TaskID: m.vals[tokTaskID], RequestID: m.vals[tokRequestID], DeployID: m.vals[tokDeployID], Group: m.vals[tokGroup]}
	for i, t := range []token{tokYear, tokMonth, tokDay, tokHour} {
		p.written[i] = -1
		if v, ok := m.vals[t]; ok {
			n, _ := strconv.Atoi(v) // fits checked its digits
			p.written[i] = n
		}
	}
	if v, ok := m.vals[tokMillis]; ok {
		if n, err := parseDigits(v, 63); err == nil {
			ms := int64(n)
			p.Time = &ms
		}
	}
	if p.TaskID != "" {
		t, _ := parseTask(p.TaskID)
		p.RequestID, p.DeployID = t.RequestID, t.DeployID
	}
	return p, p.RequestID != ""
}

// matcher is one Parse's backtracking search.
type matcher struct {
	parts []part
	key   string
	vals  map[token]string
	steps int
	// parsed is the last task id parsed (taskOf), and what it parsed to:
	// a try is checked for fitting, then for agreeing, and the bound
	// task id again for each id after it.
	parsed string
	task   Task
	taskOK bool
}

// match reports whether parts[i:] render key[at:], binding vals.
func (m *matcher) match(i, at int) bool {
	if m.steps++; m.steps > maxParseSteps {
		return false
	}
	if i == len(m.parts) {
		return at == len(m.key)
	}
	p, rest := m.parts[i], m.key[at:]
	if p.tok == literal {
		return strings.HasPrefix(rest, p.lit) && m.match(i+1, at+len(p.lit))
	}
	if v, bound := m.vals[p.tok]; bound {
		return strings.HasPrefix(rest, v) && m.match(i+1, at+len(v))
	}
	// A value never crosses a '/', since ids cannot hold one, except a file
	// name: S3 keys are flat, and a file part holding "//", "/./" or ".."
	// under a task's prefix is a log of that task like any other, one log
	// per key (docs/behaviour.md "Task-log index").
	end := strings.IndexByte(rest, '/')
	if end < 0 || p.tok == tokFilename {
		end = len(rest)
	}
	for n := minLen(p.tok); n <= end; n++ {
		v := rest[:n]
		if !m.fits(p.tok, v) {
			if fixedDigits(p.tok) > 0 || !prefixCanGrow(p.tok, v) {
				break
			}
			continue
		}
		if !m.agrees(p.tok, v) {
			continue
		}
		m.vals[p.tok] = v
		if m.match(i+1, at+n) {
			return true
		}
		delete(m.vals, p.tok)
	}
	return false
}

// minLen is the shortest value of t: %tag and %fileext may be empty.
func minLen(t token) int {
	switch t {
	case tokTag, tokFileExt:
		return 0
	}
	if n := fixedDigits(t); n > 0 {
		return n
	}
	return 1
}

// fixedDigits is the width of a time token, 0 for the others.
func fixedDigits(t token) int {
	switch t {
	case tokYear:
		return 4
	case tokMonth, tokDay, tokHour:
		return 2
	}
	return 0
}

// prefixCanGrow reports whether a value that does not fit t could still
// fit once longer: digits stop at the first non-digit.
func prefixCanGrow(t token, v string) bool {
	if t == tokIndex || t == tokMillis {
		return digitsOnly(v)
	}
	return true
}

// taskOf is parseTask of id, parsed once for the tries in a row that ask.
func (m *matcher) taskOf(id string) (Task, bool) {
	if id != m.parsed {
		m.parsed = id
		m.task, m.taskOK = parseTask(id)
	}
	return m.task, m.taskOK
}

// fits reports whether v is a value t can render to.
func (m *matcher) fits(t token, v string) bool {
	switch t {
	case tokYear, tokMonth, tokDay, tokHour:
		return len(v) == fixedDigits(t) && digitsOnly(v)
	case tokIndex, tokMillis:
		_, err := parseDigits(v, 63)
		return err == nil
	case tokTaskID:
		_, ok := m.taskOf(v)
		return ok
	case tokRequestID:
		return validID(v)
	case tokDeployID:
		return validDeployID(v)
	case tokFileExt:
		return v == "" || v[0] == '.' && !strings.Contains(v[1:], ".")
	case tokTag:
		return v == "" || validID(v)
	}
	return v != "" // %host %group %guid %filename
}

func digitsOnly(v string) bool {
	return v != "" && strings.Trim(v, "0123456789") == ""
}

// agrees reports whether binding t to v keeps the task id and the other
// ids of the key consistent.
func (m *matcher) agrees(t token, v string) bool {
	task, hasTask := m.vals[tokTaskID]
	switch t {
	case tokTaskID:
		parsed, _ := m.taskOf(v)
		return m.same(tokRequestID, parsed.RequestID) && m.same(tokDeployID, parsed.DeployID) && m.same(tokHost, parsed.Host)
	case tokRequestID, tokDeployID, tokHost:
		if !hasTask {
			return true
		}
		parsed, _ := m.taskOf(task)
		switch t {
		case tokRequestID:
			return v == parsed.RequestID
		case tokDeployID:
			return v == parsed.DeployID
		}
		return v == parsed.Host
	}
	return true
}

// same reports whether t is unbound or bound to v.
func (m *matcher) same(t token, v string) bool {
	got, bound := m.vals[t]
	return !bound || got == v
}
