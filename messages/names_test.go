package messages

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/dynamicpb"
)

// TestEnumNames checks every enum of the file: each value's name starts with the enum's
// prefix, and its word (Name) is unique and read back by ParseName.
func TestEnumNames(t *testing.T) {
	enums := File_didnmf_proto.Enums()
	for i := range enums.Len() {
		d := enums.Get(i)
		prefix := valuePrefix(d)
		seen := map[string]bool{}
		values := d.Values()
		for j := range values.Len() {
			v := values.Get(j)
			if !strings.HasPrefix(string(v.Name()), prefix) {
				t.Errorf("%s: value %s does not start with %s", d.Name(), v.Name(), prefix)
			}
			word := Name(dynamicpb.NewEnumType(d).New(v.Number()))
			if word == "" || seen[word] {
				t.Errorf("%s: value %s has the word %q, empty or taken", d.Name(), v.Name(), word)
			}
			seen[word] = true
			if n, err := ParseName(d, word); err != nil || n != v.Number() {
				t.Errorf("%s: ParseName(%q) = %d, %v; want %d", d.Name(), word, n, err, v.Number())
			}
		}
		if _, err := ParseName(d, "no such word"); err == nil {
			t.Errorf("%s: ParseName took a word no value has", d.Name())
		}
	}
}

func TestNameWords(t *testing.T) {
	for _, c := range []struct {
		e    interface{ Name() string }
		want string
	}{
		{Algorithm_ALGORITHM_HPC_ANLS, "hpc-anls"},
		{Algorithm_ALGORITHM_DID, "did"},
		{Algorithm_ALGORITHM_UNSPECIFIED, "unspecified"},
		{Algorithm(99), "Algorithm(99)"},
		{Init_INIT_NNDSVDA, "nndsvda"},
		{Form_FORM_GRAM, "gram"},
		{Layout_LAYOUT_SPARSE, "sparse"},
		{Storage_STORAGE_FLOAT32, "float32"},
		{Transform_TRANSFORM_SQRT, "sqrt"},
		{Ingest_INGEST_STREAM, "stream"},
		{JobPhase_JOB_PHASE_PLACING, "placing"},
		{JobPhase_JOB_PHASE_RUNNING, "running"},
		{JobPhase_JOB_PHASE_RECOVERING, "recovering"},
		{JobPhase_JOB_PHASE_PAUSED, "paused"},
		{JobPhase(-3), "JobPhase(-3)"},
		{ActorRole_ACTOR_ROLE_REDUCER, "reducer"},
		{JobPhase_JOB_PHASE_CANCELED, "canceled"},
		{ErrorKind_ERROR_KIND_INPUT, "input"},
		{JobEventKind_JOB_EVENT_KIND_CHECKPOINT, "checkpoint"},
	} {
		if got := c.e.Name(); got != c.want {
			t.Errorf("Name() = %q, want %q", got, c.want)
		}
	}
}

// TestJobInfoJSON: a JobInfo in JSON (node jobs --json, node status --json) carries the
// words, as when its fields were strings, and reads back.
func TestJobInfoJSON(t *testing.T) {
	in := &JobInfo{JobId: "j", Algorithm: Algorithm_ALGORITHM_HPC_ANLS, State: JobPhase_JOB_PHASE_RUNNING, Rank: 3}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if s := string(data); !strings.Contains(s, `"algorithm":"hpc-anls"`) || !strings.Contains(s, `"state":"running"`) {
		t.Errorf("JSON %s, want algorithm hpc-anls and state running as words", s)
	}
	var out JobInfo
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	if out.Algorithm != in.Algorithm || out.State != in.State || out.Rank != 3 {
		t.Errorf("read back %v, want %v", &out, in)
	}
	// The zero values are left out, as the empty strings were.
	data, err = json.Marshal(&JobInfo{JobId: "j"})
	if err != nil {
		t.Fatal(err)
	}
	if s := string(data); strings.Contains(s, "state") || strings.Contains(s, "algorithm") {
		t.Errorf("JSON %s lists an unset state or algorithm", s)
	}
	if err := json.Unmarshal([]byte(`{"state":"sleeping"}`), &out); err == nil {
		t.Error("read a state no value has")
	}
}
