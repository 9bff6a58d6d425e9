package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// otherNames are the words other fleet tools use for fleetctl's commands
// (kubectl's above all): too far from the name for an edit distance to
// find, so an unknown command answers with the command meant. They are
// suggestions rather than aliases: fleetctl's show is not kubectl's
// describe, and a name learnt once serves in the help, the docs and
// completion.
var otherNames = map[string][]string{
	"show":         {"describe", "inspect", "get"},
	"list":         {"get", "ls", "ps"},
	"freeze":       {"cordon"},
	"activate":     {"uncordon"},
	"decommission": {"drain"},
	"follow":       {"tail"}, // logs follow
}

// nameSuggestions makes the commands under cmd suggest themselves for
// their other names.
func nameSuggestions(cmd *cobra.Command) {
	for _, c := range cmd.Commands() {
		c.SuggestFor = otherNames[c.Name()]
		nameSuggestions(c)
	}
}

// unknownCommand is the usage error of a word that names no subcommand of
// cmd, with the subcommands it may have meant: those within cobra's edit
// distance (2), those it is a prefix of, and those it is another name for.
func unknownCommand(cmd *cobra.Command, typed string) error {
	msg := fmt.Sprintf("unknown command %q for %q", typed, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, which it sets only on the root
	}
	if meant := cmd.SuggestionsFor(typed); len(meant) > 0 {
		quoted := make([]string, len(meant))
		for i, m := range meant {
			quoted[i] = fmt.Sprintf("%q", m)
		}
		msg += "; did you mean " + strings.Join(quoted, " or ") + "?"
	}
	return usageError("%s (see %s --help)", msg, cmd.CommandPath())
}

// cobraUnknown reads the word of cobra's own error for an unknown command
// (fmt's %q quoting).
var cobraUnknown = regexp.MustCompile(`^unknown command ("(?:[^"\\]|\\.)*") for `)

// asUnknownCommand rewrites cobra's error for an unknown command of root
// as unknownCommand's; any other error is returned as it is.
func asUnknownCommand(root *cobra.Command, err error) error {
	var ours exitError
	if errors.As(err, &ours) {
		return err
	}
	m := cobraUnknown.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	typed, uerr := strconv.Unquote(m[1])
	if uerr != nil {
		return err
	}
	return unknownCommand(root, typed)
}
