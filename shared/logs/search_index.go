package logs

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/fleetops/fleet/shared/fault"
	"github.com/fleetops/fleet/shared/logkey"
)

// indexPage reads the next page of source s from the index instead of
// listing it (docs/behaviour.md "Task-log index"): at most limit logs of
// s's bucket under s's prefix after the key after, in key order, whose span
// overlaps s's window, and whether there are no more. These are the logs
// the listing would answer, as a token's value is the last key answered
// either way, so a search can page across a switch between the two.
//
// A source lists for one owner (task, deploy or request) but when its
// prefix swallowed another scope's (see compact) whose logs its owner's
// partition does not hold: a format that writes %taskId before
// %requestId puts request web-api's keys under request web's prefix. Each
// owner then answers its page and the pages are merged in key order.
func (h *Handler) indexPage(ctx context.Context, s source, after string, limit int) ([]logkey.Entry, bool, error) {
	var all []logkey.Entry
	done := true
	for _, of := range s.owners {
		entries, last, err := h.index.Page(ctx, of, s.bucket, s.prefix, after, limit, s.window)
		if err != nil {
			return nil, false, err
		}
		all, done = append(all, entries...), done && last
	}
	if len(s.owners) > 1 {
		// An owner that is not done answered limit logs, so the first
		// limit of the merge hold nothing past it.
		slices.SortFunc(all, func(a, b logkey.Entry) int { return strings.Compare(a.Key, b.Key) })
		all = slices.CompactFunc(all, func(a, b logkey.Entry) bool { return a.Key == b.Key })
	}
	if len(all) > limit {
		return all[:limit], false, nil
	}
	return all, done, nil
}

// indexedAs returns the owner whose partition of the index holds the logs
// of of under the key format (docs/tables.md "LogIndexTable"): a task's
// partition exists only when the format writes %taskId, and a deploy's
// when it writes %taskId or %deployId; otherwise the deploy's or the
// request's holds them, and the prefix keeps the rest out. Every '%' of a
// format starts a token (logkey.Format), so the tokens are found by name.
func (h *Handler) indexedAs(of logkey.Task) logkey.Task {
	of = logkey.Task{ID: of.ID, RequestID: of.RequestID, DeployID: of.DeployID}
	format := h.cfg.Format.String()
	if !strings.Contains(format, "%taskId") {
		of.ID = ""
		if !strings.Contains(format, "%deployId") {
			of.DeployID = ""
		}
	}
	return of
}

// joinOwners returns the owners of a and b without any whose logs another
// one's partition holds too: a request's holds its deploys' and tasks', a
// deploy's its tasks'.
func joinOwners(a, b []logkey.Task) []logkey.Task {
	var out []logkey.Task
	all := slices.Concat(a, b)
	for i, o := range all {
		// Of two equal owners, the first is kept.
		if !slices.ContainsFunc(all, func(p logkey.Task) bool { return p != o && holds(p, o) }) && slices.Index(all, o) == i {
			out = append(out, o)
		}
	}
	return out
}

// holds reports whether the partition of owner p holds every log of o.
func holds(p, o logkey.Task) bool {
	return p.RequestID == o.RequestID && (p.DeployID == "" || p.DeployID == o.DeployID) && (p.ID == "" || p.ID == o.ID)
}

// indexTimedOut turns an index read that ran out of time into a 504, as
// the GET lookups do.
func indexTimedOut(ctx context.Context, what string, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) || fault.KindOf(err) == fault.KindTimeout {
		return fault.Timeout("Timed out waiting for the log index for %s", what)
	}
	return err
}
