// Command console is ConsoleFunction: the operator console's page and
// assets on GET / behind API Gateway, with no authorizer (the page and its
// scripts hold no data; the API calls they make carry the user's
// credentials).
package main

import (
	"context"
	"net/http"
	"os"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/console"
	"github.com/fleetops/fleet/shared/startup"
)

func main() {
	startup.API(func(context.Context, startup.Setup) (http.Handler, error) {
		cfg, err := config.LoadConsole(os.Getenv)
		if err != nil {
			return nil, err
		}
		return console.New(console.SignIn(cfg))
	})
}
