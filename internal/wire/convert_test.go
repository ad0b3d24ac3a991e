package wire

import (
	"reflect"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/workload"
)

// TestWorkloadRoundTrip: every field of the workload survives the wire, so
// an agent builds the conversations its coordinator was configured with.
func TestWorkloadRoundTrip(t *testing.T) {
	full := workload.Config{
		Kind: workload.KindShareGPT, Dataset: "/data/sg.json", Seed: 42, MaxTokens: 512,
		Think: workload.ThinkTime{Kind: workload.ThinkExp, Mean: 2 * time.Second},
		Turns: workload.Turns{Min: 2, Max: 4}, SessionHeader: "X-Session-ID", Documents: 7, PromptTokens: 900,
		NaturalStop:      true,
		UserModel:        &workload.UserModelConfig{URL: "http://small:8000/v1", Model: "small", APIKeyEnv: "SMALL_KEY"},
		MaxConversations: 100, MinMessages: 3, Shuffle: true, OutputLen: true,
	}
	// Every field is set: a field added to Config but not to the wire
	// would stay zero here and fail the comparison below.
	v := reflect.ValueOf(full)
	for i := range v.NumField() {
		if v.Field(i).IsZero() {
			t.Fatalf("test config leaves %s zero: set it so the round trip covers it", v.Type().Field(i).Name)
		}
	}
	for name, w := range map[string]workload.Config{
		"full":    full,
		"default": workload.Default(),
		"fixed":   {Think: workload.ThinkTime{Kind: workload.ThinkFixed, Mean: time.Second}},
		"zero":    {},
	} {
		if got := WorkloadFromProto(WorkloadToProto(w)); !reflect.DeepEqual(got, w) {
			t.Errorf("%s: round trip\n got %+v\nwant %+v", name, got, w)
		}
	}
}
