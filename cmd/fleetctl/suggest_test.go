package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestAnUnknownCommandNamesTheCommandMeant(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"kubectl's describe is show", []string{"describe", "node-17"},
			`fleetctl: unknown command "describe" for "fleetctl"; did you mean "show"? (see fleetctl --help)`},
		{"a typo is within the edit distance", []string{"freez", "node-17"},
			`fleetctl: unknown command "freez" for "fleetctl"; did you mean "freeze"? (see fleetctl --help)`},
		{"a word with two meanings names both", []string{"get"},
			`fleetctl: unknown command "get" for "fleetctl"; did you mean "list" or "show"? (see fleetctl --help)`},
		{"kubectl's cordon is freeze", []string{"cordon", "node-17"},
			`fleetctl: unknown command "cordon" for "fleetctl"; did you mean "freeze"? (see fleetctl --help)`},
		{"a subcommand of logs is suggested under logs", []string{"logs", "folow"},
			`fleetctl: unknown command "folow" for "fleetctl logs"; did you mean "follow"? (see fleetctl logs --help)`},
		{"tail is logs follow", []string{"logs", "tail"},
			`fleetctl: unknown command "tail" for "fleetctl logs"; did you mean "follow"? (see fleetctl logs --help)`},
		{"a word near nothing gets no suggestion", []string{"zzzz"},
			`fleetctl: unknown command "zzzz" for "fleetctl" (see fleetctl --help)`},
		{"quotes in the word stay quoted", []string{`sh"w`},
			`fleetctl: unknown command "sh\"w" for "fleetctl"; did you mean "show"? (see fleetctl --help)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), tc.args, strings.NewReader(""), &stdout, &stderr)
			if code != exitUsage || stderr.String() != tc.want+"\n" || stdout.Len() != 0 {
				t.Errorf("got %d stdout %q stderr %q, want %d and\n%s", code, stdout.String(), stderr.String(), exitUsage, tc.want)
			}
		})
	}
}
