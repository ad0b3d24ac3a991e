package main

import (
	"context"
	"errors"
)

// cmdRun is not built yet; the issue that adds it replaces this file.
func (c *cli) cmdRun(_ context.Context, _ []string) error {
	return errors.New("the run command is not built yet")
}
