package evict

import (
	"maps"
	"strings"
	"testing"
)

type entry struct {
	owner string
	at    int64
}

// choose runs Choose over a table of key -> entry.
func choose(table map[string]entry, newcomer *string) (string, bool) {
	seq := func(yield func(Entry[string, string]) bool) {
		for k, e := range maps.All(table) {
			if !yield(Entry[string, string]{Key: k, Owner: e.owner, At: e.at}) {
				return
			}
		}
	}
	return Choose(seq, newcomer, func(a, b string) bool { return strings.Compare(a, b) < 0 })
}

func TestChoose(t *testing.T) {
	alice, bob, mallory := "alice", "bob", "mallory"
	for _, tt := range []struct {
		name     string
		table    map[string]entry
		newcomer *string
		want     string
		ok       bool
	}{
		{"empty", map[string]entry{}, nil, "", false},
		{"empty with a newcomer", map[string]entry{}, &alice, "", false},
		{"a flood pushes out the flooder's oldest", map[string]entry{
			"a1": {alice, 1}, "b1": {bob, 2}, "m1": {mallory, 3}, "m2": {mallory, 4}}, nil, "m1", true},
		{"the newcomer's owner counts", map[string]entry{
			"a1": {alice, 1}, "a2": {alice, 2}, "b1": {bob, 3}, "b2": {bob, 4}, "b3": {bob, 5}}, &alice, "a1", true},
		{"without a newcomer", map[string]entry{
			"a1": {alice, 1}, "a2": {alice, 2}, "b1": {bob, 3}, "b2": {bob, 4}, "b3": {bob, 5}}, nil, "b1", true},
		{"as many: the older oldest", map[string]entry{
			"a1": {alice, 5}, "b1": {bob, 2}}, nil, "b1", true},
		{"as old: the lesser key", map[string]entry{
			"x": {alice, 1}, "w": {alice, 1}}, nil, "w", true},
		{"a newcomer of an owner holding nothing", map[string]entry{
			"b1": {bob, 2}}, &mallory, "b1", true},
	} {
		got, ok := choose(tt.table, tt.newcomer)
		if got != tt.want || ok != tt.ok {
			t.Errorf("%s: Choose = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}
