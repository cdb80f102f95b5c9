package usererr

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

func TestMessages(t *testing.T) {
	for _, c := range []struct {
		name       string
		err        *Error
		want, flag string // Error(), Text(flag)
		field      string
	}{
		{"field", Field("rank", "{rank} must be >= 1, got %d", 0), "rank must be >= 1, got 0", "--rank must be >= 1, got 0", "rank"},
		{"two fields", Field("init", "{init_basis} and {init_coef} need {init} custom"),
			"init_basis and init_coef need init custom", "--init_basis and --init_coef need --init custom", "init"},
		{"a value is no placeholder", Field("ingest", "{ingest} %q: want shared or stream", "{rank}"),
			`ingest "{rank}": want shared or stream`, `--ingest "{rank}": want shared or stream`, "ingest"},
		{"braces that name no field", Field("x", "{x} {1} {A} { } {"), "x {1} {A} { } {", "--x {1} {A} { } {", "x"},
		{"a percent in a name", Field("a", "{a} %d", 5), "a 5", "--a 5", "a"},
		{"at", At("x.mtx:3", "bad value %q", "z"), `x.mtx:3: bad value "z"`, `x.mtx:3: bad value "z"`, ""},
		{"errorf", Errorf("n must be %d", 2), "n must be 2", "n must be 2", ""},
		{"new", New("plain {rank} text %d", nil), "plain {rank} text %d", "plain {rank} text %d", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			flag := func(f string) string { return "--" + f }
			if c.name == "a percent in a name" {
				flag = func(f string) string { return "%d" }
				c.flag = "%d 5"
			}
			if got := c.err.Error(); got != c.want {
				t.Errorf("Error() = %q, want %q", got, c.want)
			}
			if got := c.err.Text(flag); got != c.flag {
				t.Errorf("Text = %q, want %q", got, c.flag)
			}
			if c.err.Field != c.field {
				t.Errorf("Field = %q, want %q", c.err.Field, c.field)
			}
		})
	}
}

// TestIsAndAs: every *Error is ErrUser, through any wrapping, with its cause; other errors are
// not.
func TestIsAndAs(t *testing.T) {
	cause := &fs.PathError{Op: "open", Path: "x", Err: fs.ErrNotExist}
	wrapped := fmt.Errorf("job 7: %w", Field("rank", "{rank} must be >= 1, got %d", 0))
	for _, c := range []struct {
		name  string
		err   error
		user  bool
		cause error
	}{
		{"field", Field("rank", "x"), true, nil},
		{"wrapped by fmt", wrapped, true, nil},
		{"errorf %w", Errorf("reading: %w", cause), true, fs.ErrNotExist},
		{"new with a cause", New("x: no such file", cause), true, fs.ErrNotExist},
		{"wrap", Wrap(cause), true, fs.ErrNotExist},
		{"wrap twice is once", Wrap(Wrap(cause)), true, fs.ErrNotExist},
		{"a failure", errors.New("disk on fire"), false, nil},
		{"wrap nil", Wrap(nil), false, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if Is(c.err) != c.user || errors.Is(c.err, ErrUser) != c.user {
				t.Errorf("Is = %v, want %v", Is(c.err), c.user)
			}
			var ue *Error
			if errors.As(c.err, &ue) != c.user {
				t.Errorf("As = %v, want %v", ue != nil, c.user)
			}
			if c.cause != nil && !errors.Is(c.err, c.cause) {
				t.Errorf("%v does not wrap its cause %v", c.err, c.cause)
			}
		})
	}
	if got := Wrap(cause).Error(); got != cause.Error() {
		t.Errorf("Wrap changed the message: %q", got)
	}
	var ue *Error
	if errors.As(wrapped, &ue); ue.Field != "rank" || wrapped.Error() != "job 7: rank must be >= 1, got 0" {
		t.Errorf("wrapped: field %q, %q", ue.Field, wrapped)
	}
	if w := Wrap(Wrap(cause)).(*Error); w.Err != cause {
		t.Errorf("Wrap wrapped an *Error again: %#v", w)
	}
}

// TestTemplateRoundTrip: an error carried as its field and Template (over a wire) reads, at
// the other end, as the original does under any naming of the fields, a '%' or a brace in a
// value included.
func TestTemplateRoundTrip(t *testing.T) {
	flag := func(f string) string { return "--" + strings.ReplaceAll(f, "_", "-") }
	for _, e := range []*Error{
		Field("rank", "{rank} %d out of range: it must be between 1 and min(M, N) = %d", 11, 10),
		Field("loss", "{loss} %s needs {algo} mu (100%% {x})", "kl"),
		At("data/x.mtx:3", "value %q is not a number", "5%{rank}"),
		New("plain message 50%", nil),
		Errorf("no field, a value {l1_ratio}=%v", 2),
		Field("rank", "{rank}: a value with a NUL %s", "a\x00{rank}\x00b"),
	} {
		back := FromTemplate(e.Field, e.Template())
		if back.Field != e.Field || back.Error() != e.Error() || back.Text(flag) != e.Text(flag) {
			t.Errorf("%q (field %q) came back as %q (field %q), with flags %q, want %q",
				e.Error(), e.Field, back.Error(), back.Field, back.Text(flag), e.Text(flag))
		}
		if !Is(back) {
			t.Errorf("%q came back not the user's", e.Error())
		}
	}
	// A message holding every control character has no mark left for its fields: it comes
	// back with the same words, its fields named as text.
	var all strings.Builder
	for c := rune(0); c < ' '; c++ {
		all.WriteRune(c)
	}
	e := Field("rank", "{rank}: %s", all.String())
	if back := FromTemplate(e.Field, e.Template()); back.Error() != e.Error() || back.Field != "rank" {
		t.Errorf("%q came back as %q", e.Error(), back.Error())
	}
}

// FuzzTemplate: a template from the wire (hostile until checked) never panics, and reads back
// to itself: its Template, read again, gives the same message under any naming of the fields.
func FuzzTemplate(f *testing.F) {
	f.Add("rank", "{rank} 11 out of range")
	f.Add("", "data/x.mtx:3: value \"5%{{rank}}\" is not a number")
	f.Add("loss", "{loss} kl needs {algo} mu {")
	f.Add("", "}}{{}{x-1}{_a}{9}\x00{a}\x00")
	f.Fuzz(func(t *testing.T, field, template string) {
		e := FromTemplate(field, template)
		flag := func(f string) string { return "--" + f }
		back := FromTemplate(e.Field, e.Template())
		if back.Error() != e.Error() || back.Text(flag) != e.Text(flag) {
			t.Fatalf("%q reads %q (%q), its template %q reads %q (%q)", template, e.Error(), e.Text(flag), e.Template(), back.Error(), back.Text(flag))
		}
	})
}

// TestFromTemplateLongNames: a name in braces longer than a field's is text, not a field.
func TestFromTemplateLongNames(t *testing.T) {
	long := "{" + strings.Repeat("a", maxFieldName+1) + "}"
	flag := func(f string) string { return "--" + f }
	if got := FromTemplate("", long+" {rank}").Text(flag); got != long+" --rank" {
		t.Errorf("got %q", got)
	}
}
