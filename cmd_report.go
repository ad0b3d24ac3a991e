package main

import (
	"context"
	"errors"
)

// cmdReport is not built yet; the issue that adds it replaces this file.
func (c *cli) cmdReport(_ context.Context, _ []string) error {
	return errors.New("the report command is not built yet")
}
