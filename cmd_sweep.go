package main

import (
	"context"
	"errors"
)

// cmdSweep is not built yet; the issue that adds it replaces this file.
func (c *cli) cmdSweep(_ context.Context, _ []string) error {
	return errors.New("the sweep command is not built yet")
}
