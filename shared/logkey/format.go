// Package logkey owns the keys of task logs in S3 (docs/behaviour.md "Task logs"): the
// LOG_KEY_FORMAT engine, task-id parsing and id validation, and the key
// prefixes a task, deploy or request lookup lists, with their time windows,
// de-duplication and allowlists. Standard library only.
package logkey

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultFormat is the LOG_KEY_FORMAT used when none is configured.
const DefaultFormat = "%requestId/%Y/%m/%taskId_%index-%s-%filename"

// DefaultGroup is the %group of a file or scope that names none.
const DefaultGroup = "default"

// token is one %-token of a key format; literal marks a part that is text.
type token uint8

const (
	literal token = iota
	tokRequestID
	tokDeployID
	tokTaskID
	tokHost
	tokGroup
	tokTag
	tokFilename
	tokFileExt
	tokGUID
	tokIndex
	tokMillis
	// The time tokens are consecutive and run from coarsest to finest, so
	// the finest one present is the greatest.
	tokYear
	tokMonth
	tokDay
	tokHour
)

// tokens lists every token's name, longest first, so that %deployId is not
// read as %d followed by "eployId". Matching is case-sensitive: %host is not
// %H.
var tokens = []struct {
	name string
	tok  token
}{
	{"requestId", tokRequestID},
	{"deployId", tokDeployID},
	{"filename", tokFilename},
	{"fileext", tokFileExt},
	{"taskId", tokTaskID},
	{"group", tokGroup},
	{"index", tokIndex},
	{"guid", tokGUID},
	{"host", tokHost},
	{"tag", tokTag},
	{"Y", tokYear},
	{"m", tokMonth},
	{"d", tokDay},
	{"H", tokHour},
	{"s", tokMillis},
}

func (t token) isTime() bool { return t >= tokYear }

// part is a piece of a parsed format: literal text, or one token.
type part struct {
	lit string
	tok token
}

// Format is a parsed LOG_KEY_FORMAT. Keys and prefixes are rendered from its
// parts, never by replacing tokens in a rendered string, so an id or file
// name that happens to contain "%taskId" or "%Y" is written as it is. Every
// '%' starts a token; there is no escape for a literal one. The zero Format
// is DefaultFormat.
type Format struct {
	src   string
	parts []part
}

// ParseFormat parses a LOG_KEY_FORMAT. It fails on an empty format, on an
// unknown token (naming it), and on a format whose request lookups could not
// be told apart: one that has no %requestId or %taskId before the first token
// a request lookup cannot fill, since such a lookup would list other
// requests' logs. Its errors are configuration errors, not domain errors.
func ParseFormat(s string) (Format, error) {
	if s == "" {
		return Format{}, errors.New("key format is empty")
	}
	var parts []part
	for rest := s; rest != ""; {
		i := strings.IndexByte(rest, '%')
		if i < 0 {
			parts = append(parts, part{lit: rest})
			break
		}
		if i > 0 {
			parts = append(parts, part{lit: rest[:i]})
		}
		rest = rest[i+1:]
		t, n := match(rest)
		if t == literal {
			return Format{}, fmt.Errorf("unknown token %q in key format %q", "%"+unknownName(rest), s)
		}
		parts = append(parts, part{tok: t})
		rest = rest[n:]
	}
	f := Format{src: s, parts: parts}
	if err := f.checkRequestScoped(); err != nil {
		return Format{}, err
	}
	return f, nil
}

// match returns the token that s starts with and the length of its name.
func match(s string) (token, int) {
	for _, t := range tokens {
		if strings.HasPrefix(s, t.name) {
			return t.tok, len(t.name)
		}
	}
	return literal, 0
}

// unknownName returns the word after a '%' that is not a token, for errors:
// its letters, digits and underscores, or else its first character.
func unknownName(s string) string {
	n := strings.IndexFunc(s, func(r rune) bool {
		return !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_')
	})
	switch n {
	case -1:
		return s
	case 0:
		_, size := utf8.DecodeRuneInString(s)
		return s[:size]
	}
	return s[:n]
}

func (f Format) checkRequestScoped() error {
	probe := RequestScope("r")
	for _, p := range f.parts {
		if p.tok == tokRequestID || p.tok == tokTaskID {
			return nil
		}
		if p.tok == literal || p.tok.isTime() {
			continue
		}
		if _, ok, _ := probe.value(p.tok); !ok {
			return fmt.Errorf("key format %q cannot keep requests apart: %%requestId or %%taskId must come before %%%s", f.src, p.tok)
		}
	}
	return fmt.Errorf("key format %q cannot keep requests apart: it needs %%requestId or %%taskId", f.src)
}

// String returns the token's name, without the '%'.
func (t token) String() string {
	for _, n := range tokens {
		if n.tok == t {
			return n.name
		}
	}
	return "literal"
}

// get returns f, or the default format for the zero Format.
func (f Format) get() Format {
	if f.parts == nil {
		f, _ = ParseFormat(DefaultFormat)
	}
	return f
}

// String returns the format as configured.
func (f Format) String() string { return f.get().src }

// File is what an uploader knows when it writes one log file.
type File struct {
	Task     Task
	Group    string // %group; empty means DefaultGroup
	Tag      string // %tag; may be empty
	Filename string // %filename is its base name (after the last '/')
	GUID     string // %guid
	Index    int    // %index, the file's sequence number
	Modified time.Time
}

// Key returns the object key an uploader writes file under. The time tokens
// and %s come from file.Modified in UTC. %fileext is the extension of the
// base name with its leading dot (".log"), as uploaders have always written
// it, and empty when the name has none. Ids are not validated: Key describes
// what an uploader writes, whatever it was given.
func (f Format) Key(file File) string {
	name := file.Filename[strings.LastIndexByte(file.Filename, '/')+1:]
	at := file.Modified.UTC()
	var b strings.Builder
	for _, p := range f.get().parts {
		switch p.tok {
		case literal:
			b.WriteString(p.lit)
		case tokRequestID:
			b.WriteString(file.Task.RequestID)
		case tokDeployID:
			b.WriteString(file.Task.DeployID)
		case tokTaskID:
			b.WriteString(file.Task.ID)
		case tokHost:
			b.WriteString(file.Task.Host)
		case tokGroup:
			b.WriteString(orDefault(file.Group))
		case tokTag:
			b.WriteString(file.Tag)
		case tokFilename:
			b.WriteString(name)
		case tokFileExt:
			b.WriteString(path.Ext(name))
		case tokGUID:
			b.WriteString(file.GUID)
		case tokIndex:
			b.WriteString(strconv.Itoa(file.Index))
		case tokMillis:
			b.WriteString(strconv.FormatInt(at.UnixMilli(), 10))
		default:
			b.WriteString(timeValue(p.tok, at))
		}
	}
	return b.String()
}

func orDefault(group string) string {
	if group == "" {
		return DefaultGroup
	}
	return group
}

// timeValue renders a time token of at, zero-padded to 4 digits for the year
// and 2 for the others.
func timeValue(t token, at time.Time) string {
	switch t {
	case tokYear:
		return fmt.Sprintf("%04d", at.Year())
	case tokMonth:
		return fmt.Sprintf("%02d", int(at.Month()))
	case tokDay:
		return fmt.Sprintf("%02d", at.Day())
	}
	return fmt.Sprintf("%02d", at.Hour())
}
