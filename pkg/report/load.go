package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Load reads sweeps back for re-rendering: each path is a sweep output
// directory (its benchmark-sweep-*.tsv files, sweep.json, and the point
// directories) or a TSV file. Every row becomes a Point; rows of the same
// (mode, level) from different inputs become separate runs (runs are
// renumbered input after input). A row whose point directory holds
// histograms is loaded with its Window, so its percentiles merge; a row
// from a bare TSV keeps only its Row, and the report then says percentiles
// were averaged. The facts (SLA, modes, baseline) come from the first
// sweep.json found; the caller may override them.
func Load(paths ...string) (*Sweep, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("load sweeps: %w: no input", ErrInvalidSweep)
	}
	var out *Sweep
	offset := 0
	var ids []string
	// Run directories (one point each) are numbered per mode and level:
	// a kv run and a round_robin run are both run 1, a second kv run is
	// kv's run 2.
	runDirs := map[key]int{}
	for _, path := range paths {
		st, err := os.Stat(path)
		if err != nil {
			return nil, fmt.Errorf("load sweeps: %w", err)
		}
		var meta *Sweep
		var points []Point
		if st.IsDir() {
			meta, points, err = loadDir(path)
		} else {
			points, err = loadTSV(path, "")
		}
		if err != nil {
			return nil, err
		}
		if out == nil {
			out = &Sweep{}
		}
		if meta != nil && out.ID == "" {
			points0 := out.Points
			*out = *meta
			out.Points = points0
		}
		if meta != nil {
			ids = append(ids, meta.ID)
			out.AlternatedOrder = out.AlternatedOrder || meta.AlternatedOrder
		}
		out.sources = append(out.sources, path)
		if len(points) == 1 && points[0].fromRun {
			k := key{0, points[0].Mode, points[0].Level}
			runDirs[k]++
			points[0].Run = runDirs[k]
			out.Points = append(out.Points, points...)
			continue
		}
		maxRun := 0
		for i := range points {
			maxRun = max(maxRun, points[i].Run)
			points[i].Run += offset
			if points[i].Window == nil {
				out.averagedFiles = appendOnce(out.averagedFiles, path)
			}
		}
		offset += maxRun
		out.Points = append(out.Points, points...)
	}
	if len(paths) > 1 || out.ID == "" {
		if len(ids) > 0 {
			out.ID = strings.Join(ids, "+")
		} else {
			out.ID = "combined"
		}
	}
	out.Runs = 0
	return out, nil
}

func appendOnce(s []string, v string) []string {
	for _, x := range s {
		if x == v {
			return s
		}
	}
	return append(s, v)
}

// loadDir reads one sweep output directory.
func loadDir(dir string) (*Sweep, []Point, error) {
	var meta *Sweep
	if b, err := os.ReadFile(filepath.Join(dir, SweepFile)); err == nil {
		var j sweepJSON
		if err := json.Unmarshal(b, &j); err != nil {
			return nil, nil, fmt.Errorf("load %s: %w", filepath.Join(dir, SweepFile), err)
		}
		meta = j.sweep()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("load sweep: %w", err)
	}
	tsvs, err := filepath.Glob(filepath.Join(dir, "benchmark-sweep-*.tsv"))
	if err != nil {
		return nil, nil, fmt.Errorf("load sweep: %w", err)
	}
	if len(tsvs) == 0 {
		// A `fleetbench run` output directory: one point, its mode the
		// run's --label, else the directory's name.
		if _, err := os.Stat(filepath.Join(dir, pointFile)); err == nil {
			p, err := readPoint(dir)
			if err != nil {
				return nil, nil, err
			}
			if p.Mode == "" {
				p.Mode = filepath.Base(filepath.Clean(dir))
			}
			p.Run, p.fromRun = 1, true
			return meta, []Point{*p}, nil
		}
		return nil, nil, fmt.Errorf("load sweep %s: %w: no benchmark-sweep-*.tsv (a sweep's output) and no %s (a run's)", dir, ErrInvalidSweep, pointFile)
	}
	sort.Strings(tsvs)
	var points []Point
	offset := 0
	for _, t := range tsvs {
		ps, err := loadTSV(t, dir)
		if err != nil {
			return nil, nil, err
		}
		maxRun := 0
		for i := range ps {
			maxRun = max(maxRun, ps[i].Run)
			ps[i].Run += offset
		}
		offset += maxRun
		points = append(points, ps...)
	}
	return meta, points, nil
}

// loadTSV reads a TSV's rows as Points; with dir set, a row whose point
// directory holds histograms is loaded with its Window.
func loadTSV(path, dir string) ([]Point, error) {
	rows, err := ReadTSV(path)
	if err != nil {
		return nil, err
	}
	points := make([]Point, 0, len(rows))
	seen := make(map[key]int)
	for i := range rows {
		r := rows[i]
		k := key{r.Run, r.Mode, r.Concurrency}
		if j, dup := seen[k]; dup {
			// A resumed sweep may repeat a level; the last row wins.
			points = append(points[:j], points[j+1:]...)
			for kk, jj := range seen {
				if jj > j {
					seen[kk] = jj - 1
				}
			}
		}
		p := Point{Run: r.Run, Mode: r.Mode, Level: r.Concurrency, RPS: r.RPS, MeasureStart: r.MeasureStart,
			MeasureEnd: r.MeasureEnd, Coverage: r.Coverage, Degraded: r.Degraded, Row: &r}
		if dir != "" {
			pd := filepath.Join(dir, PointDir(r.Run, r.Mode, r.Concurrency))
			if _, err := os.Stat(filepath.Join(pd, pointFile)); err == nil {
				lp, err := readPoint(pd)
				if err != nil {
					return nil, err
				}
				// point.json has the exact window bounds; the TSV's are
				// whole seconds.
				lp.Row = &r
				p = *lp
			}
		}
		seen[k] = len(points)
		points = append(points, p)
	}
	return points, nil
}
