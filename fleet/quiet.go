package fleet

import "github.com/hashicorp/go-hclog"

// Quiet returns logger unchanged when it logs at debug level or below,
// else a logger that drops messages below warn, so the lifecycle logs of
// a local coordinator and its agents (joins, stage assignments, drains: a
// dozen lines per level) do not bury a command's progress. Use the parent
// at debug level to see them. The logger it returns is as safe for
// concurrent use as logger.
func Quiet(logger hclog.Logger) hclog.Logger {
	if logger.IsDebug() {
		return logger
	}
	return &quietLogger{Logger: logger, min: hclog.Warn}
}

// quietLogger passes on only messages at or above min.
type quietLogger struct {
	hclog.Logger
	min hclog.Level
}

func (q *quietLogger) Log(level hclog.Level, msg string, args ...any) {
	if level >= q.min {
		q.Logger.Log(level, msg, args...)
	}
}
func (q *quietLogger) Trace(msg string, args ...any) { q.Log(hclog.Trace, msg, args...) }
func (q *quietLogger) Debug(msg string, args ...any) { q.Log(hclog.Debug, msg, args...) }
func (q *quietLogger) Info(msg string, args ...any)  { q.Log(hclog.Info, msg, args...) }
func (q *quietLogger) Warn(msg string, args ...any)  { q.Log(hclog.Warn, msg, args...) }
func (q *quietLogger) Error(msg string, args ...any) { q.Log(hclog.Error, msg, args...) }
func (q *quietLogger) IsTrace() bool                 { return false }
func (q *quietLogger) IsDebug() bool                 { return false }
func (q *quietLogger) IsInfo() bool                  { return q.min <= hclog.Info && q.Logger.IsInfo() }
func (q *quietLogger) With(args ...any) hclog.Logger {
	return &quietLogger{Logger: q.Logger.With(args...), min: q.min}
}
func (q *quietLogger) Named(name string) hclog.Logger {
	return &quietLogger{Logger: q.Logger.Named(name), min: q.min}
}
func (q *quietLogger) ResetNamed(name string) hclog.Logger {
	return &quietLogger{Logger: q.Logger.ResetNamed(name), min: q.min}
}
