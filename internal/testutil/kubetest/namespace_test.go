package kubetest

import "testing"

func TestNamespacePrefix(t *testing.T) {
	tests := []struct {
		name, test, want string
	}{
		{"simple", "TestJob", "fbt-testjob-"},
		{"subtest", "TestJob/indexed_2", "fbt-testjob-indexed-2-"},
		{"symbols only", "/__/", "fbt-test-"},
		{"long", "TestAVeryLongNameThatGoesOnAndOnAndOnUntilItCannotFitInADNSLabel/sub",
			"fbt-testaverylongnamethatgoesonandonandonuntilitcannotfit-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := namespacePrefix(tt.test)
			if got != tt.want {
				t.Errorf("namespacePrefix(%q) = %q, want %q", tt.test, got, tt.want)
			}
			if len(got)+5 > 63 {
				t.Errorf("prefix %q is %d long; with the random suffix it exceeds 63", got, len(got))
			}
		})
	}
}
