package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/internal/termtext"
)

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// colour is how a table paints a cell; nil paints nothing.
type colour func(row, col int, cell string) string

// stateColours paints the cells of column col as the state they name, on a
// terminal and unless colour is off.
func (a *app) stateColours(col int) colour {
	if a.settings.noColor || !isTerminal(a.stdout) {
		return nil
	}
	return func(row, c int, cell string) string {
		if c != col || row == 0 {
			return cell
		}
		code := map[client.State]string{
			client.Active: "32", client.Frozen: "36", client.StartingDecommission: "33", client.Decommissioning: "33",
			client.Decommissioned: "90", client.Dead: "31", client.MissingOnStartup: "31",
		}[client.State(strings.TrimSpace(cell))]
		if code == "" {
			return cell
		}
		return "\x1b[" + code + "m" + cell + "\x1b[0m"
	}
}

// writeTable writes rows as aligned columns two spaces apart, the first
// row being the header; the last column is not padded.
func writeTable(w io.Writer, rows [][]string, paint colour) {
	var widths []int
	for _, r := range rows {
		for i, cell := range r {
			if i >= len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	var b strings.Builder
	for ri, r := range rows {
		for i, cell := range r {
			last := i == len(r)-1
			padded := cell
			if !last {
				padded += strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell))
			}
			if paint != nil {
				// Painting the padded cell keeps the escape codes
				// out of the width.
				padded = paint(ri, i, padded)
			}
			b.WriteString(padded)
			if !last {
				b.WriteString("  ")
			}
		}
		b.WriteString("\n")
	}
	io.WriteString(w, b.String())
}

// when formats an epoch-ms instant in the local zone, to the second.
func when(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05")
}

// visibleRows renders every cell of a table with visible.
func visibleRows(rows [][]string) [][]string {
	for _, r := range rows {
		for i, cell := range r {
			r[i] = termtext.Visible(cell)
		}
	}
	return rows
}

// short cuts s to n characters, with an ellipsis, on one line. It cuts
// the text as received: visible renders what is left.
func short(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// orDash is s, or "-" when empty, so that columns never hold a blank cell.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// bytesHuman formats a size as 1.2 MB, in the units (kB, MB, GB) of every
// size fleetctl prints.
func bytesHuman(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}
