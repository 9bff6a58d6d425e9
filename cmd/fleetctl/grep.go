package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sync/errgroup"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/internal/termtext"
)

type grepOptions struct {
	ignoreCase, invert, count, filesOnly, fixed bool
	before, after                               int // lines of context, as grep -B and -A
}

// context reports whether lines of context are printed: not with -c or
// -l, as grep.
func (o grepOptions) context() bool {
	return (o.before > 0 || o.after > 0) && !o.count && !o.filesOnly
}

// matcher tells whether a line matches. A pattern without
// metacharacters is searched as bytes (bytes.Index is vectorised; a
// regular expression walks every byte); -i on such a pattern lowers only
// the lines that could match.
type matcher struct {
	re      *regexp.Regexp
	literal []byte // when not nil, a fixed string
	folded  bool   // literal is lower case and lines are folded first
}

func newMatcher(pattern string, o grepOptions) (*matcher, error) {
	literal := o.fixed || regexp.QuoteMeta(pattern) == pattern
	if literal && (!o.ignoreCase || isASCII(pattern)) {
		m := &matcher{literal: []byte(pattern)}
		if o.ignoreCase {
			m.literal, m.folded = bytes.ToLower(m.literal), true
		}
		return m, nil
	}
	if o.fixed {
		pattern = regexp.QuoteMeta(pattern)
	}
	if o.ignoreCase {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	return &matcher{re: re}, nil
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// match reports whether line matches; scratch is a buffer for folding.
func (m *matcher) match(line []byte, scratch *[]byte) bool {
	if m.re != nil {
		return m.re.Match(line)
	}
	if !m.folded {
		return bytes.Contains(line, m.literal)
	}
	*scratch = append((*scratch)[:0], line...)
	lowerASCII(*scratch)
	return bytes.Contains(*scratch, m.literal)
}

func lowerASCII(b []byte) {
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + ('a' - 'A')
		}
	}
}

// grepAll searches every log, jobs at a time, and prints the results in
// the order of logs. It reports whether any line was selected, and the
// logs that could not be searched: one log's failure stops no other.
func grepAll(ctx context.Context, c *cache, logs []client.Log, m *matcher, o grepOptions, jobs int, w io.Writer) (bool, []fetchFailure, error) {
	if jobs == 0 {
		jobs = max(runtime.NumCPU(), 4)
	}
	// Each log's output waits in its buffer until the logs before it are
	// printed, so that the output reads as one grep over the list.
	results := make([]chan grepResult, len(logs))
	for i := range results {
		results[i] = make(chan grepResult, 1)
	}
	var found bool
	var printErr error
	var printed sync.WaitGroup
	printed.Go(func() {
		bw := bufio.NewWriterSize(w, 256<<10)
		printedAny := false
		for _, ch := range results {
			res, ok := <-ch
			if !ok {
				break
			}
			found = found || res.selected > 0
			// With context, grep separates the groups of two files too.
			if o.context() && res.out.Len() > 0 {
				if printedAny {
					bw.WriteString("--\n")
				}
				printedAny = true
			}
			if _, err := bw.Write(res.out.Bytes()); err != nil && printErr == nil {
				printErr = err
			}
		}
		if err := bw.Flush(); err != nil && printErr == nil {
			printErr = err
		}
	})
	failures := make([]error, len(logs))
	var g errgroup.Group
	g.SetLimit(jobs)
	for i, l := range logs {
		g.Go(func() error {
			res, err := grepOne(ctx, c, l, m, o)
			if err != nil {
				failures[i] = err
				res = grepResult{out: &bytes.Buffer{}}
			}
			results[i] <- res
			return nil
		})
	}
	g.Wait()
	printed.Wait()
	if ctx.Err() != nil {
		return found, nil, ctx.Err()
	}
	var failed []fetchFailure
	for i, err := range failures {
		if err != nil {
			failed = append(failed, fetchFailure{logs[i].Key, err})
		}
	}
	return found, failed, printErr
}

// grepResult is what one log gave: the lines to print, and how many
// lines were selected.
type grepResult struct {
	out      *bytes.Buffer
	selected int
}

// grepOne searches one log. The key it prints is rendered visible; the
// lines are the log's own, as grep prints them. Its errors do not name the
// key.
func grepOne(ctx context.Context, c *cache, l client.Log, m *matcher, o grepOptions) (grepResult, error) {
	r, err := c.open(ctx, l)
	if err != nil {
		return grepResult{}, err
	}
	defer r.Close()
	out := &bytes.Buffer{}
	name := termtext.Visible(l.Key)
	if o.context() {
		selected, err := grepContext(r, m, o, name, out)
		if err != nil {
			return grepResult{}, client.Redact(err)
		}
		return grepResult{out, selected}, nil
	}
	if m.re == nil && !o.invert {
		selected, err := grepLiteral(r, m, o, name, out)
		if err != nil {
			return grepResult{}, client.Redact(err)
		}
		return grepResult{out, selected}, nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 256<<10), 64<<20)
	var scratch []byte
	n, selected := 0, 0
	prefix := name + ":"
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if m.match(line, &scratch) == o.invert {
			continue
		}
		selected++
		if o.filesOnly {
			break
		}
		if o.count {
			continue
		}
		out.WriteString(prefix)
		out.WriteString(strconv.Itoa(n))
		out.WriteByte(':')
		out.Write(line)
		out.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return grepResult{}, client.Redact(err)
	}
	switch {
	case o.filesOnly && selected > 0:
		out.WriteString(name + "\n")
	case o.count:
		fmt.Fprintf(out, "%s%d\n", prefix, selected)
	}
	return grepResult{out, selected}, nil
}

// grepLiteral is grepOne for a fixed string: it searches whole chunks of
// lines with bytes.Index and counts newlines only up to each hit, instead
// of testing line by line, which makes a rare string cost little more than
// reading the log.
func grepLiteral(r io.Reader, m *matcher, o grepOptions, key string, out *bytes.Buffer) (int, error) {
	buf := make([]byte, 1<<20)
	var folded []byte
	lines, kept, selected := 0, 0, 0 // lines before buf[0]; bytes carried over
	for {
		n, err := io.ReadFull(r, buf[kept:])
		end := kept + n
		eof := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !eof {
			return selected, err
		}
		cut := end
		if !eof {
			cut = bytes.LastIndexByte(buf[:end], '\n') + 1
			if cut == 0 { // one line longer than the buffer: grow it
				if len(buf) >= 64<<20 {
					return selected, bufio.ErrTooLong
				}
				buf = append(buf, make([]byte, len(buf))...)
				kept = end
				continue
			}
		}
		data, hay := buf[:cut], buf[:cut]
		if m.folded {
			folded = append(folded[:0], data...)
			lowerASCII(folded)
			hay = folded
		}
		counted := 0
		for pos := 0; pos < len(data); {
			i := bytes.Index(hay[pos:], m.literal)
			if i < 0 {
				break
			}
			i += pos
			start := bytes.LastIndexByte(data[:i], '\n') + 1
			stop := bytes.IndexByte(data[i:], '\n')
			if stop < 0 {
				stop = len(data)
			} else {
				stop += i
			}
			lines += bytes.Count(data[counted:start], []byte{'\n'})
			counted = start
			selected++
			if o.filesOnly {
				out.WriteString(key + "\n")
				return selected, nil
			}
			if !o.count {
				out.WriteString(key)
				out.WriteByte(':')
				out.WriteString(strconv.Itoa(lines + 1))
				out.WriteByte(':')
				out.Write(data[start:stop])
				out.WriteByte('\n')
			}
			pos = stop + 1
		}
		lines += bytes.Count(data[counted:], []byte{'\n'})
		if eof {
			break
		}
		kept = copy(buf, buf[cut:end])
	}
	if o.count {
		fmt.Fprintf(out, "%s:%d\n", key, selected)
	}
	return selected, nil
}

// grepContext is grepOne with lines of context, printed as grep prints
// them: key:line:text for a selected line, key-line-text for context, and
// "--" between groups that are not adjacent.
func grepContext(r io.Reader, m *matcher, o grepOptions, key string, out *bytes.Buffer) (int, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 256<<10), 64<<20)
	type held struct {
		n    int
		line []byte
	}
	var before []held // the unprinted lines just above, at most o.before
	var scratch []byte
	n, selected, after, last := 0, 0, 0, 0
	emit := func(n int, line []byte, sep byte) {
		if last > 0 && n > last+1 {
			out.WriteString("--\n")
		}
		out.WriteString(key)
		out.WriteByte(sep)
		out.WriteString(strconv.Itoa(n))
		out.WriteByte(sep)
		out.Write(line)
		out.WriteByte('\n')
		last = n
	}
	for sc.Scan() {
		n++
		line := sc.Bytes()
		switch {
		case m.match(line, &scratch) != o.invert:
			selected++
			for _, h := range before {
				emit(h.n, h.line, '-')
			}
			before = before[:0]
			emit(n, line, ':')
			after = o.after
		case after > 0:
			emit(n, line, '-')
			after--
		case o.before > 0:
			if len(before) == o.before {
				before = append(before[:0], before[1:]...)
			}
			before = append(before, held{n, append([]byte(nil), line...)})
		}
	}
	return selected, sc.Err()
}
