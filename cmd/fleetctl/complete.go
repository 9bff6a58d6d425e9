package main

import (
	"context"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetops/fleet/client"
	"github.com/fleetops/fleet/internal/termtext"
)

// completionTimeout bounds the API call a completion makes: a shell waits
// for it on every Tab, so a slow or unreachable endpoint must cost little
// and complete nothing rather than hang the prompt.
const completionTimeout = 2 * time.Second

// candidate is a machine id a completion offers, and what the shell shows
// beside it (zsh and fish do).
type candidate struct{ id, about string }

// idSource is where a command's id completions come from.
type idSource func(ctx context.Context, c *client.Client) ([]candidate, error)

// everyMachine offers every machine of the list, with its state.
func everyMachine(ctx context.Context, c *client.Client) ([]candidate, error) {
	list, err := c.ListSlaves(ctx, "")
	out := make([]candidate, len(list))
	for i, s := range list {
		out[i] = candidate{s.ID, string(s.CurrentState.State)}
	}
	return out, err
}

// expiringMachines offers the machines with an expiring change, the only
// ones make-permanent accepts.
func expiringMachines(ctx context.Context, c *client.Client) ([]candidate, error) {
	list, err := c.ListExpiring(ctx)
	out := make([]candidate, len(list))
	for i, e := range list {
		out[i] = candidate{e.MachineID, "reverts to " + string(e.RevertToState)}
	}
	return out, err
}

// completeIDs completes the machine ids of a command that takes at most
// most of them (0: any number) from source: those starting with what is
// typed and not already on the line. It makes one call, in one attempt,
// within completionTimeout; any failure (a bad setting, no answer, an
// error) completes nothing. A truncated list completes what it holds.
//
// At 100,000 machines that is one list of the whole fleet per Tab (the API
// has no prefix query), which the service bounds to what Lambda can answer
// (about 6 MB); when that takes longer than completionTimeout, nothing is
// completed and the id is typed in full.
func (a *app) completeIDs(source idSource, most int) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		const directive = cobra.ShellCompDirectiveNoFileComp
		if most > 0 && len(args) >= most {
			return nil, directive
		}
		s, err := resolve(a.flags, cmd.Flags(), os.Getenv)
		if err != nil {
			return nil, directive
		}
		a.settings = s
		ctx, cancel := context.WithTimeout(cmd.Context(), min(completionTimeout, s.timeout))
		defer cancel()
		c, err := a.clientWith(ctx, client.Options{MaxAttempts: 1, AttemptTimeout: completionTimeout, CallTimeout: completionTimeout})
		if err != nil {
			return nil, directive
		}
		found, err := source(ctx, c)
		if err != nil {
			return nil, directive
		}
		slices.SortFunc(found, func(x, y candidate) int { return strings.Compare(x.id, y.id) })
		var out []string
		for _, m := range found {
			// An id the shell could not take back as typed (a control
			// character, a space) is not offered.
			if !strings.HasPrefix(m.id, toComplete) || slices.Contains(args, m.id) || termtext.Visible(m.id) != m.id || strings.Contains(m.id, " ") {
				continue
			}
			out = append(out, m.id+"\t"+termtext.Visible(m.about))
		}
		return out, directive
	}
}
