// Command console is ConsoleFunction: the operator console's page and
// assets on GET / behind API Gateway, with no authorizer (the page and its
// scripts hold no data; the API calls they make carry the user's
// credentials).
package main

import (
	"context"
	"net/http"
	"os"

	"github.com/fleetops/fleet/app/consoleapp"
	"github.com/fleetops/fleet/shared/startup"
)

func main() {
	startup.API(func(context.Context, startup.Setup) (http.Handler, error) {
		return consoleapp.New(os.Getenv)
	})
}
