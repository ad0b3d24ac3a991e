package main

import (
	"context"
	"errors"
)

// cmdCoordinator is not built yet; the issue that adds it replaces this file.
func (c *cli) cmdCoordinator(_ context.Context, _ []string) error {
	return errors.New("the coordinator command is not built yet")
}
