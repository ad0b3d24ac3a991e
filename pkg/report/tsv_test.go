package report

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTSVRoundTrip(t *testing.T) {
	s := goldenSweep()
	var rows []Row
	for i := range s.Points {
		rows = append(rows, RowOf(&s.Points[i]))
	}
	var b bytes.Buffer
	if err := WriteTSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), strings.Join(LeadingColumns, "\t")+"\t") {
		t.Fatalf("header does not begin with the dashboards' columns: %.200q", b.String())
	}
	got, err := ParseTSV(bytes.NewReader(b.Bytes()), "mem")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(rows) {
		t.Fatalf("%d rows, want %d", len(got), len(rows))
	}
	for i := range rows {
		if FormatRow(&got[i]) != FormatRow(&rows[i]) {
			t.Errorf("row %d:\n got %q\nwant %q", i, FormatRow(&got[i]), FormatRow(&rows[i]))
		}
	}
}

// TestReadTSVLeadingOnly reads the dashboards' 11-column format: the
// extra fields stay zero and repeated (mode, level) rows become runs.
func TestReadTSVLeadingOnly(t *testing.T) {
	in := strings.Join(LeadingColumns, "\t") + "\n" +
		"kv\t20\t0\t0.1\t0.2\t0.5\t1.5\t3.2\t100\t2025-01-01T00:00:00Z\t2025-01-01T00:05:00Z\n" +
		"\n" +
		"kv\t20\t0\t0.1\t0.3\t0.5\t0\t3.2\t100\t2025-01-01T01:00:00Z\t2025-01-01T01:05:00Z\r\n"
	rows, err := ParseTSV(strings.NewReader(in), "old.tsv")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Run != 1 || rows[1].Run != 2 || rows[1].TTFTP95 != 0.3 || rows[0].ErrorPct != 1.5 ||
		rows[0].MeasureEnd.Minute() != 5 || rows[0].TTFTP99 != 0 {
		t.Fatalf("rows %+v", rows)
	}
	// Extra columns in another order, one unknown, one row shorter.
	in = strings.Join(LeadingColumns, "\t") + "\tnote\trun\tttft_p99_sec\n" +
		"kv\t20\t0\t0.1\t0.2\t0.5\t0\t3\t100\t\t\tx\t4\t0.9\n" +
		"kv\t40\t0\t0.1\t0.2\t0.5\t0\t3\t100\t\t\n"
	rows, err = ParseTSV(strings.NewReader(in), "extra.tsv")
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].Run != 4 || rows[0].TTFTP99 != 0.9 || rows[1].Run != 1 {
		t.Fatalf("rows %+v", rows)
	}
}

func TestReadTSVErrors(t *testing.T) {
	head := strings.Join(LeadingColumns, "\t") + "\n"
	good := "kv\t20\t0\t0.1\t0.2\t0.5\t0\t3\t100\t2025-01-01T00:00:00Z\t2025-01-01T00:05:00Z"
	for _, tt := range []struct{ name, in, want string }{
		{"empty", "", "no header"},
		{"wrong header", "mode\tlevel\n", `bad.tsv:1: malformed sweep TSV: header column 2: "level", want "concurrency"`},
		{"short header", "mode\tconcurrency\n", `header column 3: missing "rps"`},
		{"bad number", head + strings.Replace(good, "0.2", "fast", 1) + "\n", `bad.tsv:2: column 5 "ttft_p95_sec": malformed sweep TSV: "fast" is not a number`},
		{"bad level", head + "\n" + strings.Replace(good, "\t20\t", "\t-3\t", 1) + "\n", `bad.tsv:3: column 2 "concurrency"`},
		{"short row", head + "kv\t20\t0\n", `bad.tsv:2: column 4 "ttft_p50_sec": malformed sweep TSV: missing`},
		{"long row", head + good + "\textra\n", "bad.tsv:2: malformed sweep TSV: 12 columns, but the header has 11"},
		{"bad time", head + strings.Replace(good, "2025-01-01T00:05:00Z", "yesterday", 1) + "\n", `column 11 "measure_end_utc"`},
		{"nan", head + strings.Replace(good, "0.5", "NaN", 1) + "\n", `column 6 "kv_hit_rate": malformed sweep TSV: "NaN" is not a finite number`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTSV(strings.NewReader(tt.in), "bad.tsv")
			if !errors.Is(err, ErrTSV) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want ErrTSV containing %q", err, tt.want)
			}
		})
	}
	if _, err := ReadTSV(filepath.Join(t.TempDir(), "missing.tsv")); err == nil {
		t.Error("ReadTSV of a missing file succeeded")
	}
}

func TestAppenderResume(t *testing.T) {
	path := filepath.Join(t.TempDir(), TSVName("20250101-000000"))
	a, err := OpenAppender(path)
	if err != nil {
		t.Fatal(err)
	}
	r := Row{Mode: "kv", Concurrency: 20, Run: 1, TTFTP95: 0.2}
	if err := a.Append(&r); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// A crash in the middle of the next row.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString("kv\t40\t0\t0.1")
	_ = f.Close()

	a, err = OpenAppender(path)
	if err != nil {
		t.Fatal(err)
	}
	r.Concurrency = 40
	if err := a.Append(&r); err != nil {
		t.Fatal(err)
	}
	_ = a.Close()
	rows, err := ReadTSV(path)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if len(rows) != 2 || rows[1].Concurrency != 40 || strings.Count(string(b), "mode\t") != 1 {
		t.Fatalf("rows %+v\n%s", rows, b)
	}

	other := filepath.Join(t.TempDir(), "x.tsv")
	_ = os.WriteFile(other, []byte("a\tb\n"), 0o644)
	if _, err := OpenAppender(other); !errors.Is(err, ErrTSV) {
		t.Errorf("appending to a foreign file: %v", err)
	}
}

func FuzzParseTSV(f *testing.F) {
	var b bytes.Buffer
	s := goldenSweep()
	rows := []Row{RowOf(&s.Points[0]), RowOf(&s.Points[5])}
	_ = WriteTSV(&b, rows)
	f.Add(b.String())
	f.Add(strings.Join(LeadingColumns, "\t") + "\nkv\t20\t0\t0.1\t0.2\t0.5\t0\t3\t100\t\t\n")
	f.Add("mode\n")
	f.Fuzz(func(t *testing.T, in string) {
		rows, err := ParseTSV(strings.NewReader(in), "fuzz")
		if err != nil {
			if !errors.Is(err, ErrTSV) {
				t.Fatalf("error does not wrap ErrTSV: %v", err)
			}
			return
		}
		// What parses re-parses to the same rows once written.
		var out bytes.Buffer
		if err := WriteTSV(&out, rows); err != nil {
			t.Fatal(err)
		}
		again, err := ParseTSV(&out, "again")
		if err != nil {
			t.Fatalf("rewritten rows do not parse: %v\n%q", err, out.String())
		}
		if len(again) != len(rows) {
			t.Fatalf("%d rows, then %d", len(rows), len(again))
		}
		for i := range rows {
			if a, b := FormatRow(&rows[i]), FormatRow(&again[i]); a != b {
				t.Fatalf("row %d: %q then %q", i, a, b)
			}
		}
	})
}
