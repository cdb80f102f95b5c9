package actors

import (
	"regexp"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/internal/jobctl"
)

// dataTargetSpec is the grammar of isDataTarget as a regular expression: the tests hold the
// parser to it.
var dataTargetSpec = regexp.MustCompile(`^host/` + jobIDForm + `-(s[0-9]{1,9}|e[0-9]{1,20}-r[0-9]{1,9}-[0-9]{1,9})$`)

func TestIsDataTarget(t *testing.T) {
	job := "j0123456789abcdef"
	long := strings.Repeat("a", 64)
	tests := []struct {
		name string
		want bool
	}{
		{"host/" + jobctl.ShardName(job, 0), true},
		{"host/" + jobctl.ShardName(job, 123456789), true},
		{"host/" + jobctl.ReducerName(job, 0, 1, 0), true},
		{"host/" + jobctl.ReducerName(job, 18446744073709551615, 123456789, 123456789), true},
		{"host/" + jobctl.ReducerName("a-e1-r2-3", 4, 5, 6), true}, // job IDs may hold '-'
		{"host/" + jobctl.ShardName("x-s", 1), true},
		{"host/" + long + "-s1", true},
		{"host/a" + long + "-s1", false},                        // job ID of 65
		{"host/-s1", false},                                     // empty job ID
		{"host/" + job + "-s1234567890", false},                 // shard of 10 digits
		{"host/" + job + "-s", false},                           // no shard
		{"host/" + job + "s1", false},                           // no '-'
		{"host/" + job + "-e1-r1-1234567890", false},            // lo of 10 digits
		{"host/" + job + "-e123456789012345678901-r1-1", false}, // epoch of 21 digits
		{"host/" + job + "-e-r1-1", false},
		{"host/" + job + "-e1-r-1", false},
		{"host/" + job + "-e1r1-1", false},
		{"host/" + job + "-1-r1-1", false},
		{"host/" + job + "-coord", false},
		{"host/" + job + "-s1\n", false},
		{"host/j\xff-s1", false},
		{"host/j.b-s1", false},
		{"host/" + job + "-s1/child", false},
		{"hosts/" + job + "-s1", false},
		{"Host/" + job + "-s1", false},
		{"host/", false},
		{"host", false},
		{"", false},
		{"/host/" + job + "-s1", false},
	}
	for _, tc := range tests {
		if got := isDataTarget(tc.name); got != tc.want {
			t.Errorf("isDataTarget(%q) = %v, want %v", tc.name, got, tc.want)
		}
		if spec := dataTargetSpec.MatchString(tc.name); spec != tc.want {
			t.Errorf("the grammar says %v for %q, the table %v", spec, tc.name, tc.want)
		}
	}
}

// FuzzIsJobID holds isJobID to jobIDForm on arbitrary strings.
func FuzzIsJobID(f *testing.F) {
	spec := regexp.MustCompile(`^` + jobIDForm + `$`)
	for _, s := range []string{"j0123456789abcdef", "", "a-b_C9", strings.Repeat("a", 64), strings.Repeat("a", 65), "a.b", "a\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isJobID(s), spec.MatchString(s); got != want {
			t.Fatalf("isJobID(%q) = %v, jobIDForm says %v", s, got, want)
		}
	})
}

// FuzzIsDataTarget holds the parser to its grammar on arbitrary names.
func FuzzIsDataTarget(f *testing.F) {
	for _, s := range []string{"host/j-s1", "host/j-e1-r2-3", "host/a-e1-r2-3-s4", "host/j--s1", "host/j-e-s1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := isDataTarget(name), dataTargetSpec.MatchString(name); got != want {
			t.Fatalf("isDataTarget(%q) = %v, the grammar says %v", name, got, want)
		}
	})
}

func BenchmarkIsDataTarget(b *testing.B) {
	names := []string{"host/" + jobctl.ShardName("j0123456789abcdef", 3), "host/" + jobctl.ReducerName("j0123456789abcdef", 2, 1, 0)}
	b.Run("parser", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if !isDataTarget(names[i&1]) {
				b.Fatal("rejected")
			}
		}
	})
	b.Run("regexp", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if !dataTargetSpec.MatchString(names[i&1]) {
				b.Fatal("rejected")
			}
		}
	})
}
