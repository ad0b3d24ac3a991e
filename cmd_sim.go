package main

import (
	"context"
	"errors"
)

// cmdSim is not built yet; the issue that adds it replaces this file.
func (c *cli) cmdSim(_ context.Context, _ []string) error {
	return errors.New("the sim command is not built yet")
}
