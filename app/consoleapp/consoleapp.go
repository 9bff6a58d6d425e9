// Package consoleapp is the composition root of ConsoleFunction: the one
// constructor from the function's environment to the console's handler
// (docs/decisions.md "One composition root per function").
package consoleapp

import (
	"net/http"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/console"
)

// New reads ConsoleFunction's variables from getenv and returns the
// console, signing in as the API it serves the page for expects.
func New(getenv func(string) string) (http.Handler, error) {
	cfg, err := config.LoadConsole(getenv)
	if err != nil {
		return nil, err
	}
	return console.New(console.SignIn(console.API(cfg)))
}
