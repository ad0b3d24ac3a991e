package main

import (
	"context"
	"errors"
)

// cmdAgent is not built yet; the issue that adds it replaces this file.
func (c *cli) cmdAgent(_ context.Context, _ []string) error {
	return errors.New("the agent command is not built yet")
}
