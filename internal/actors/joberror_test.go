package actors

import (
	"errors"
	"strings"
	"testing"

	"github.com/didnmf/didnmf/usererr"
)

// TestJobErrorTemplate: a refused job's template names its field for the front end only when
// it says what the message says and is of a message's size; otherwise the message stands.
func TestJobErrorTemplate(t *testing.T) {
	flag := func(f string) string { return "--" + f }
	for _, c := range []struct {
		name, message, template, wantField, wantText string
	}{
		{"agreeing", "rank must be >= 1, got 0", "{rank} must be >= 1, got 0", "rank", "--rank must be >= 1, got 0"},
		{"no template", "rank must be >= 1, got 0", "", "", "rank must be >= 1, got 0"},
		{"saying something else", "rank must be >= 1, got 0", "job finished; nothing wrong with {seed}", "", "rank must be >= 1, got 0"},
		{"oversized", strings.Repeat("{a", 4000), strings.Repeat("{{a", 4000), "", strings.Repeat("{a", 4000)},
	} {
		err := error(&JobError{JobID: "j", Kind: KindInput, Message: c.message, Field: "rank", Template: c.template})
		var ue *usererr.Error
		if !errors.As(err, &ue) || !errors.Is(err, usererr.ErrUser) {
			t.Fatalf("%s: %v is not the user's", c.name, err)
		}
		field := ue.Field
		if c.wantField == "" {
			field = ""
			if ue.Field != "" {
				t.Errorf("%s: field %q taken from a template that does not agree", c.name, ue.Field)
			}
		}
		if field != c.wantField || ue.Text(flag) != c.wantText {
			t.Errorf("%s: field %q, text %q; want %q, %q", c.name, ue.Field, ue.Text(flag), c.wantField, c.wantText)
		}
	}
}
