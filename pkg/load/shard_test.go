package load_test

import (
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/shard"
)

// Agents hand the engine a shard.Indexer.
var (
	_ load.Indexer   = (*shard.Indexer)(nil)
	_ load.Restarter = (*shard.Indexer)(nil)
)
