// compose-check validates compose files the way `docker compose config` does,
// with the compose-spec reference loader (compose-go), for machines that have
// no compose plugin. Usage: compose-check compose/docker-compose.yml
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/compose-spec/compose-go/v2/cli"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: compose-check FILE...")
		os.Exit(2)
	}
	opts, err := cli.NewProjectOptions(os.Args[1:], cli.WithOsEnv, cli.WithDotEnv, cli.WithName("ferry"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	project, err := opts.LoadProject(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "invalid:", err)
		os.Exit(1)
	}
	fmt.Printf("valid: %v (services: %v)\n", os.Args[1:], project.ServiceNames())
}
