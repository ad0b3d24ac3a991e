package servermetrics

import (
	"errors"
	"slices"
	"testing"
)

func TestResolveSim(t *testing.T) {
	for _, tc := range []struct {
		name   string
		eps    []string
		simURL string
		want   []string
		err    error
	}{
		{"no sim named", []string{"http://a:8000/metrics"}, "", []string{"http://a:8000/metrics"}, nil},
		{"sim replaced", []string{"sim", "http://a:8000/metrics"}, "http://127.0.0.1:4000/", []string{"http://127.0.0.1:4000/metrics", "http://a:8000/metrics"}, nil},
		{"sim without a simulator", []string{"sim"}, "", []string{"sim"}, ErrNoSim},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Endpoints: tc.eps}
			got, err := c.ResolveSim(tc.simURL)
			if !errors.Is(err, tc.err) {
				t.Fatalf("err = %v, want %v", err, tc.err)
			}
			if !slices.Equal(got.Endpoints, tc.want) {
				t.Errorf("endpoints = %v, want %v", got.Endpoints, tc.want)
			}
			if tc.err == nil && tc.simURL != "" && c.Endpoints[0] != "sim" {
				t.Error("ResolveSim changed its receiver")
			}
		})
	}
}
