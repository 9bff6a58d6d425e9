// Command console is ConsoleFunction: the operator console's page and
// assets on GET / behind API Gateway, with no authorizer (the page and its
// scripts hold no data; the API calls they make carry the user's
// credentials).
package main

import (
	"os"

	"github.com/aws/aws-lambda-go/lambda"

	"github.com/fleetops/fleet/shared/config"
	"github.com/fleetops/fleet/shared/console"
	"github.com/fleetops/fleet/shared/edge"
	"github.com/fleetops/fleet/shared/lambdalog"
	"github.com/fleetops/fleet/shared/web"
)

func main() {
	log := lambdalog.New(os.Stdout, os.Getenv)
	cfg, err := config.LoadConsole(os.Getenv)
	if err != nil {
		log.Error(err.Error())
		os.Exit(1)
	}
	h, err := console.New(console.SignIn(cfg))
	if err != nil {
		log.Error(err.Error())
		os.Exit(1)
	}
	lambda.Start(edge.Handler(web.Wrap(h, web.Options{Logger: log, RequestID: edge.RequestID})))
}
