// Package flags is the one registry of the settings that several commands
// share: the target, the workload and the load. `run`, `coordinator` and
// `sweep` register them through the functions here, so a setting has one
// name, one default and one help text everywhere. It must not hold a default
// of its own: the defaults live with the package that owns the setting
// (workload.Default, load.DefaultWarmup, ...), and it must not import
// fleet/, coordinator/ or agent/.
//
// Flags are pflag flags (GNU style, accepted anywhere on the line). Each is
// annotated with a help group (Group) that the command layer uses to print
// grouped help. Record and Replay let a file-backed command (sweep) apply
// the flags a user typed over a file's values and leave the others alone.
package flags
