package report

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// TimeLayout is the layout of the TSV's measure_start_utc and
// measure_end_utc columns.
const TimeLayout = "2006-01-02T15:04:05Z"

// TSVName returns the sweep TSV's file name for sweep id (YYYYMMDD-HHMMSS).
func TSVName(id string) string { return "benchmark-sweep-" + id + ".tsv" }

// LeadingColumns are the columns every sweep TSV begins with, in order: the
// format existing dashboards read. Units: rps is the open-loop target rate
// (0 for a closed loop); ttft_*_sec in seconds; kv_hit_rate the
// token-weighted hit rate as a 0–1 fraction; error_pct failed ÷ sent turns
// in percent (0–100); actual_rps successful requests and tops output tokens
// per second of the measurement window; the times UTC (TimeLayout).
var LeadingColumns = []string{
	"mode", "concurrency", "rps", "ttft_p50_sec", "ttft_p95_sec", "kv_hit_rate",
	"error_pct", "actual_rps", "tops", "measure_start_utc", "measure_end_utc",
}

// ErrTSV is wrapped by every TSV parse error.
var ErrTSV = errors.New("malformed sweep TSV")

// column is one TSV column: its name, how a Row spells it and how it is
// parsed back.
type column struct {
	name string
	get  func(*Row) string
	set  func(*Row, string) error
}

func secCol(name string, f func(*Row) *float64) column  { return floatCol(name, 6, f) }
func rateCol(name string, f func(*Row) *float64) column { return floatCol(name, 3, f) }

func floatCol(name string, prec int, f func(*Row) *float64) column {
	return column{
		name: name,
		get:  func(r *Row) string { return strconv.FormatFloat(*f(r), 'f', prec, 64) },
		set: func(r *Row, s string) error {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				return errors.New("not a number")
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return errors.New("not a finite number")
			}
			*f(r) = v
			return nil
		},
	}
}

// optCol is a figure that may not have been measured: an empty cell, read
// back as nil.
func optCol(name string, prec int, f func(*Row) **float64) column {
	return column{
		name: name,
		get: func(r *Row) string {
			if v := *f(r); v != nil {
				return strconv.FormatFloat(*v, 'f', prec, 64)
			}
			return ""
		},
		set: func(r *Row, s string) error {
			if s == "" {
				*f(r) = nil
				return nil
			}
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return errors.New("not a finite number")
			}
			*f(r) = &v
			return nil
		},
	}
}

func intCol(name string, f func(*Row) *int64) column {
	return column{
		name: name,
		get:  func(r *Row) string { return strconv.FormatInt(*f(r), 10) },
		set: func(r *Row, s string) error {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil || v < 0 {
				return errors.New("not a non-negative integer")
			}
			*f(r) = v
			return nil
		},
	}
}

func timeCol(name string, f func(*Row) *time.Time) column {
	return column{
		name: name,
		get: func(r *Row) string {
			if f(r).IsZero() {
				return ""
			}
			return f(r).UTC().Format(TimeLayout)
		},
		set: func(r *Row, s string) error {
			if s == "" {
				return nil
			}
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return fmt.Errorf("not a UTC time like %s", TimeLayout)
			}
			*f(r) = t.UTC()
			return nil
		},
	}
}

// columns are every column fleetbench writes, the LeadingColumns first.
var columns = []column{
	{
		name: "mode",
		get:  func(r *Row) string { return r.Mode },
		set: func(r *Row, s string) error {
			if s == "" {
				return errors.New("empty mode")
			}
			r.Mode = s
			return nil
		},
	},
	{
		name: "concurrency",
		get:  func(r *Row) string { return strconv.Itoa(r.Concurrency) },
		set: func(r *Row, s string) error {
			v, err := strconv.Atoi(s)
			if err != nil || v <= 0 {
				return errors.New("not a positive integer")
			}
			r.Concurrency = v
			return nil
		},
	},
	rateCol("rps", func(r *Row) *float64 { return &r.RPS }),
	secCol("ttft_p50_sec", func(r *Row) *float64 { return &r.TTFTP50 }),
	secCol("ttft_p95_sec", func(r *Row) *float64 { return &r.TTFTP95 }),
	floatCol("kv_hit_rate", 6, func(r *Row) *float64 { return &r.HitRate }),
	floatCol("error_pct", 4, func(r *Row) *float64 { return &r.ErrorPct }),
	rateCol("actual_rps", func(r *Row) *float64 { return &r.ActualRPS }),
	rateCol("tops", func(r *Row) *float64 { return &r.TOPS }),
	timeCol("measure_start_utc", func(r *Row) *time.Time { return &r.MeasureStart }),
	timeCol("measure_end_utc", func(r *Row) *time.Time { return &r.MeasureEnd }),
	{
		name: "run",
		get:  func(r *Row) string { return strconv.Itoa(r.Run) },
		set: func(r *Row, s string) error {
			v, err := strconv.Atoi(s)
			if err != nil || v < 0 {
				return errors.New("not a non-negative integer")
			}
			r.Run = v
			return nil
		},
	},
	secCol("ttft_p99_sec", func(r *Row) *float64 { return &r.TTFTP99 }),
	secCol("ttft_mean_sec", func(r *Row) *float64 { return &r.TTFTMean }),
	secCol("tpot_p50_sec", func(r *Row) *float64 { return &r.TPOTP50 }),
	secCol("tpot_p95_sec", func(r *Row) *float64 { return &r.TPOTP95 }),
	secCol("tpot_p99_sec", func(r *Row) *float64 { return &r.TPOTP99 }),
	secCol("itl_p50_sec", func(r *Row) *float64 { return &r.ITLP50 }),
	secCol("itl_p95_sec", func(r *Row) *float64 { return &r.ITLP95 }),
	secCol("itl_p99_sec", func(r *Row) *float64 { return &r.ITLP99 }),
	secCol("e2e_p50_sec", func(r *Row) *float64 { return &r.E2EP50 }),
	secCol("e2e_p95_sec", func(r *Row) *float64 { return &r.E2EP95 }),
	secCol("e2e_p99_sec", func(r *Row) *float64 { return &r.E2EP99 }),
	rateCol("input_tps", func(r *Row) *float64 { return &r.InputTPS }),
	rateCol("output_tps", func(r *Row) *float64 { return &r.OutputTPS }),
	intCol("requests", func(r *Row) *int64 { return &r.Requests }),
	intCol("errors", func(r *Row) *int64 { return &r.Errors }),
	floatCol("turn1_hit_rate", 6, func(r *Row) *float64 { return &r.Turn1HitRate }),
	floatCol("later_hit_rate", 6, func(r *Row) *float64 { return &r.LaterHitRate }),
	floatCol("coverage", 4, func(r *Row) *float64 { return &r.Coverage }),
	{
		name: "degraded",
		get:  func(r *Row) string { return strconv.FormatBool(r.Degraded) },
		set: func(r *Row, s string) error {
			v, err := strconv.ParseBool(s)
			if err != nil {
				return errors.New("not true or false")
			}
			r.Degraded = v
			return nil
		},
	},
	floatCol("start_skew_ms", 1, func(r *Row) *float64 { return &r.StartSkewMS }),
	optCol("goodput_rps", 3, func(r *Row) **float64 { return &r.Goodput }),
	optCol("slo_attainment", 4, func(r *Row) **float64 { return &r.SLOAttainment }),
	optCol("server_hit_rate", 6, func(r *Row) **float64 { return &r.ServerHitRate }),
	optCol("queue_mean", 3, func(r *Row) **float64 { return &r.QueueMean }),
	optCol("queue_max", 3, func(r *Row) **float64 { return &r.QueueMax }),
	optCol("kv_usage_max", 4, func(r *Row) **float64 { return &r.KVUsageMax }),
	optCol("preemptions", 0, func(r *Row) **float64 { return &r.Preemptions }),
	optCol("worker_skew", 3, func(r *Row) **float64 { return &r.WorkerSkew }),
	optCol("spec_accept_rate", 4, func(r *Row) **float64 { return &r.SpecAcceptRate }),
}

// columnIndex is each column's index in columns (Row.absent's bits).
var columnIndex = func() map[string]int {
	if len(columns) > 64 {
		panic("report: more columns than a colSet holds")
	}
	m := make(map[string]int, len(columns))
	for i, c := range columns {
		m[c.name] = i
	}
	return m
}()

// Columns returns the names of every column fleetbench writes, in order.
func Columns() []string {
	names := make([]string, len(columns))
	for i, c := range columns {
		names[i] = c.name
	}
	return names
}

// header is the TSV's header line, with its newline.
func header() string { return strings.Join(Columns(), "\t") + "\n" }

// FormatRow returns r as one TSV line with its newline. Text fields have
// tabs and line breaks replaced by spaces so the line stays one row.
func FormatRow(r *Row) string {
	var b strings.Builder
	for i, c := range columns {
		if i > 0 {
			b.WriteByte('\t')
		}
		b.WriteString(strings.Map(func(c rune) rune {
			if c == '\t' || c == '\n' || c == '\r' {
				return ' '
			}
			return c
		}, c.get(r)))
	}
	b.WriteByte('\n')
	return b.String()
}

// WriteTSV writes the header and rows to w.
func WriteTSV(w io.Writer, rows []Row) error {
	var b bytes.Buffer
	b.WriteString(header())
	for i := range rows {
		b.WriteString(FormatRow(&rows[i]))
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write tsv: %w", err)
	}
	return nil
}

// maxLine bounds one TSV line, so a corrupt file cannot make the reader
// buffer without limit.
const maxLine = 1 << 20

// ReadTSV reads a sweep TSV: any file whose header begins with the
// LeadingColumns. Columns after them are matched by name: known ones are
// parsed, unknown ones ignored, and missing ones (in the header, or at the
// end of a shorter row) leave their Row fields zero. Blank lines are
// skipped. Rows without a run column, or with run 0, are numbered by their
// order among rows of the same (mode, concurrency): 1, 2, ... Errors wrap
// ErrTSV and name the file, line and column.
func ReadTSV(path string) ([]Row, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read tsv: %w", err)
	}
	defer f.Close()
	return ParseTSV(f, path)
}

// ParseTSV parses a sweep TSV from r as ReadTSV does; name is used in
// errors.
func ParseTSV(r io.Reader, name string) ([]Row, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxLine)
	byName := make(map[string]*column, len(columns))
	for i := range columns {
		byName[columns[i].name] = &columns[i]
	}
	var (
		cols   []*column // per header position; nil: ignored
		names  []string
		rows   []Row
		line   int
		counts = make(map[cellKey]int)
	)
	for sc.Scan() {
		line++
		text := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(text) == "" {
			continue
		}
		fields := strings.Split(text, "\t")
		if cols == nil {
			if err := checkHeader(fields); err != nil {
				return nil, fmt.Errorf("%s:%d: %w: %w", name, line, ErrTSV, err)
			}
			names = fields
			cols = make([]*column, len(fields))
			seen := make(map[string]bool, len(fields))
			for i, f := range fields {
				f = strings.TrimSpace(f)
				if seen[f] {
					return nil, fmt.Errorf("%s:%d: column %d %q: %w: repeated column", name, line, i+1, f, ErrTSV)
				}
				seen[f] = true
				cols[i] = byName[f]
			}
			continue
		}
		if len(fields) < len(LeadingColumns) {
			return nil, fmt.Errorf("%s:%d: column %d %q: %w: missing (the row has %d of at least %d columns)",
				name, line, len(fields)+1, LeadingColumns[len(fields)], ErrTSV, len(fields), len(LeadingColumns))
		}
		if len(fields) > len(cols) {
			return nil, fmt.Errorf("%s:%d: %w: %d columns, but the header has %d", name, line, ErrTSV, len(fields), len(cols))
		}
		// Every column after the leading ones is absent until a cell of
		// it is read.
		row := Row{absent: colSet(1)<<len(columns) - colSet(1)<<len(LeadingColumns)}
		for i, f := range fields {
			c := cols[i]
			if c == nil {
				continue
			}
			f = strings.TrimSpace(f)
			if f == "" && i >= len(LeadingColumns) {
				continue // an empty extra column reads as missing
			}
			row.absent &^= 1 << columnIndex[c.name]
			if err := c.set(&row, f); err != nil {
				return nil, fmt.Errorf("%s:%d: column %d %q: %w: %q is %w", name, line, i+1, names[i], ErrTSV, truncate(f), err)
			}
		}
		k := cellKey{row.Mode, row.Concurrency}
		counts[k]++
		if row.Run == 0 {
			row.Run = counts[k]
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w: %w", name, line+1, ErrTSV, err)
	}
	if cols == nil {
		return nil, fmt.Errorf("%s: %w: no header", name, ErrTSV)
	}
	return rows, nil
}

// checkHeader reports whether fields begin with the LeadingColumns.
func checkHeader(fields []string) error {
	for i, want := range LeadingColumns {
		if i >= len(fields) {
			return fmt.Errorf("header column %d: missing %q (the header must begin with %s)",
				i+1, want, strings.Join(LeadingColumns, " "))
		}
		if got := strings.TrimSpace(fields[i]); got != want {
			return fmt.Errorf("header column %d: %q, want %q", i+1, truncate(got), want)
		}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// Appender appends rows to a sweep TSV as levels finish: each Append
// writes one complete line and syncs the file, so a crash loses at most the
// level being measured. An Appender must be used by one goroutine at a time.
type Appender struct {
	f    *os.File
	path string
}

// OpenAppender opens the sweep TSV at path for appending, creating it with
// the header when it does not exist or is empty. An existing file must
// begin with fleetbench's header (a resumed sweep); its complete rows are
// kept and a last line cut short by a crash is removed.
func OpenAppender(path string) (*Appender, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("open tsv: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open tsv: %w", err)
	}
	a := &Appender{f: f, path: path}
	if err := a.prepare(); err != nil {
		_ = f.Close()
		return nil, err
	}
	return a, nil
}

// prepare writes the header into an empty file, or checks an existing one.
func (a *Appender) prepare() error {
	st, err := a.f.Stat()
	if err != nil {
		return fmt.Errorf("open tsv: %w", err)
	}
	if st.Size() == 0 {
		return a.write(header())
	}
	first, err := bufio.NewReader(io.NewSectionReader(a.f, 0, st.Size())).ReadString('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("open tsv %s: %w", a.path, err)
	}
	if strings.TrimRight(first, "\r\n") != strings.TrimSuffix(header(), "\n") {
		return fmt.Errorf("open tsv %s: %w: the header is not fleetbench's (%d columns)", a.path, ErrTSV, len(columns))
	}
	// A crash can leave the last row cut short: drop it (it is the level
	// that was being written, which the resumed sweep measures again).
	b, err := io.ReadAll(io.NewSectionReader(a.f, 0, st.Size()))
	if err != nil {
		return fmt.Errorf("open tsv %s: %w", a.path, err)
	}
	end := int64(bytes.LastIndexByte(b, '\n') + 1)
	if end < st.Size() {
		if err := a.f.Truncate(end); err != nil {
			return fmt.Errorf("truncate tsv %s: %w", a.path, err)
		}
	}
	if _, err := a.f.Seek(end, io.SeekStart); err != nil {
		return fmt.Errorf("open tsv %s: %w", a.path, err)
	}
	return nil
}

// Append writes r as one line and syncs the file.
func (a *Appender) Append(r *Row) error {
	return a.write(FormatRow(r))
}

func (a *Appender) write(s string) error {
	if _, err := a.f.WriteString(s); err != nil {
		return fmt.Errorf("append tsv %s: %w", a.path, err)
	}
	if err := a.f.Sync(); err != nil {
		return fmt.Errorf("sync tsv %s: %w", a.path, err)
	}
	return nil
}

// Path returns the TSV's path.
func (a *Appender) Path() string { return a.path }

// Close closes the file.
func (a *Appender) Close() error {
	if err := a.f.Close(); err != nil {
		return fmt.Errorf("close tsv %s: %w", a.path, err)
	}
	return nil
}
