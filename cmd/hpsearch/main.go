// Command hpsearch runs hyperparameter searches. See README.md.
package main

import (
	"os"

	"github.com/hpsearch/hpsearch/internal/cli"
)

func main() { os.Exit(cli.Main()) }
