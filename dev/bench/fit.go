package main

import (
	"fmt"
	"strings"
)

// The sizes the figures are about, which the bench does not run at: it
// measures two or more smaller sizes, fits a line through them and prints
// the line's value at these, marked as extrapolated (fit).
const (
	scaleMachines = 100_000
	scaleLogs     = 10_000_000
)

// point is one measurement: a size (machines, logs) and what it cost
// there (seconds, calls, bytes, units).
type point struct{ size, value float64 }

// line is the per-item cost of a figure, fitted by least squares through
// the points measured: value = fixed + perItem × size. Time, calls and
// bytes grow linearly with the items a step walks; a line through two
// sizes or more says what a size not run would cost, and the points say
// how far that is from what was measured.
type line struct {
	fixed, perItem float64
	points         []point
}

// fit is the line through points (at least two sizes).
func fit(points ...point) line {
	var n, sx, sy, sxx, sxy float64
	for _, p := range points {
		n++
		sx += p.size
		sy += p.value
		sxx += p.size * p.size
		sxy += p.size * p.value
	}
	l := line{points: points}
	if d := n*sxx - sx*sx; d != 0 {
		l.perItem = (n*sxy - sx*sy) / d
	}
	l.fixed = (sy - l.perItem*sx) / n
	return l
}

// at is the line's value at size.
func (l line) at(size float64) float64 { return l.fixed + l.perItem*size }

// extrapolated says the line's value at size, formatted by unit, and
// where it came from: "≈ 41.2 s at 100,000 (extrapolated: 0.41 ms an item
// + 0.2 s, from 10,000 → 4.3 s, 20,000 → 8.4 s)".
func (l line) extrapolated(size float64, unit func(float64) string) string {
	var from []string
	for _, p := range l.points {
		from = append(from, fmt.Sprintf("%s → %s", thousands(p.size), unit(p.value)))
	}
	return fmt.Sprintf("≈ %s at %s (extrapolated: %s an item %s %s, from %s)", unit(l.at(size)), thousands(size),
		unit(l.perItem), sign(l.fixed), unit(abs(l.fixed)), strings.Join(from, ", "))
}

func sign(v float64) string {
	if v < 0 {
		return "−"
	}
	return "+"
}

func abs(v float64) float64 { return max(v, -v) }

// thousands formats a whole number with commas: 10,000,000.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Units for extrapolated: seconds, counts, megabytes and dollars.
func seconds(v float64) string {
	if abs(v) < 1 {
		return fmt.Sprintf("%.2g ms", v*1000)
	}
	return fmt.Sprintf("%.1f s", v)
}

func count(v float64) string {
	if abs(v) < 10 {
		return fmt.Sprintf("%.3g", v)
	}
	return thousands(v)
}

func megabytes(v float64) string { return fmt.Sprintf("%.3g MB", v) }
