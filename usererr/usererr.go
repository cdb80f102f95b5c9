// Package usererr is the one kind of error that is the user's to fix: an input that cannot be
// read, a job spec a rule refuses, a spec the data or the cluster refuses, a flag given wrong.
// Every package that reports such an error returns an *Error (or wraps one), and every
// *Error wraps ErrUser, so one test tells them from failures, whatever package made them:
//
//	if errors.Is(err, usererr.ErrUser) { ... } // the CLI exits with status 2, HTTP answers 400
//
//	var ue *usererr.Error
//	if errors.As(err, &ue) && ue.Field == "rank" { ... }
//
// A message names what is wrong and the value; an error about a field of a job spec names the
// field (Field), and may name fields in its text as {field}: Error reads them as the field's
// names ("rank must be >= 1, got 0"), and Text lets a front end put its own names in their
// place (the CLI's flags: "--rank must be >= 1, got 0").
//
// The package imports nothing of the project, so every package may import it.
package usererr

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUser is wrapped by every *Error: errors.Is(err, ErrUser) reports whether err is the
// user's to fix.
var ErrUser = errors.New("the user's to fix")

// Error is an error that is the user's to fix.
type Error struct {
	// Field is the job spec's field the error is about, by its wire name ("rank", "fan-in",
	// "init_basis"), or "" when it is about no field.
	Field string
	// Where is what the message starts with, e.g. a file or "file:line" ("": nothing).
	Where string
	// Err is the cause (an I/O error, say), or nil.
	Err error

	// format and args make the message; format may name fields as {field}. An error that
	// came as a template (FromTemplate) has its pieces in segs instead.
	format string
	args   []any
	segs   []segment
}

// Field returns the error of a rule of the spec's field (a wire name). format may name fields
// as {name}, which are put in before the arguments, so that no value reads as a name.
func Field(field, format string, args ...any) *Error {
	return &Error{Field: field, format: format, args: args}
}

// At returns an error about where (a file, "file:line", a spec) whose message is "where: "
// and the formatted text.
func At(where, format string, args ...any) *Error {
	return &Error{Where: where, format: format, args: args}
}

// Errorf returns an error whose message is the formatted text; a %w verb makes its operand
// the cause, as fmt.Errorf does.
func Errorf(format string, args ...any) *Error {
	return &Error{format: format, args: args, Err: errors.Unwrap(fmt.Errorf(format, args...))}
}

// New returns an error with the message msg and the cause (nil: none).
func New(msg string, cause error) *Error {
	return &Error{format: "%s", args: []any{msg}, Err: cause}
}

// Wrap returns err as the user's to fix: err itself when it is already, else an *Error with
// err's message and err as its cause. Wrap(nil) is nil.
func Wrap(err error) error {
	if err == nil || errors.Is(err, ErrUser) {
		return err
	}
	return &Error{format: "%s", args: []any{err.Error()}, Err: err}
}

// Is reports whether err is the user's to fix (errors.Is(err, ErrUser)).
func Is(err error) bool { return errors.Is(err, ErrUser) }

// Error returns the message, fields named by their own names.
func (e *Error) Error() string { return e.Text(nil) }

// Text returns the message with each field named {field} in it replaced by name(field) (nil:
// the field's own name); a front end names its flags or parameters so.
func (e *Error) Text(name func(field string) string) string {
	if e.segs != nil {
		var b strings.Builder
		for _, sg := range e.segs {
			switch {
			case sg.field == "":
				b.WriteString(sg.text)
			case name != nil:
				b.WriteString(name(sg.field))
			default:
				b.WriteString(sg.field)
			}
		}
		return b.String()
	}
	msg := fmt.Sprintf(replaceFields(e.format, name), e.args...)
	// fmt.Sprintf does not know %w: it is %v here.
	if strings.Contains(msg, "%!w(") {
		msg = fmt.Errorf(replaceFields(e.format, name), e.args...).Error()
	}
	if e.Where != "" {
		return e.Where + ": " + msg
	}
	return msg
}

// Template returns the message with each field named in it as {field} and every other brace
// doubled ("{{", "}}"): what FromTemplate takes back, to carry the error over a wire to a front
// end that names the fields its way.
func (e *Error) Template() string {
	braces := strings.NewReplacer("{", "{{", "}", "}}")
	var b strings.Builder
	if e.segs != nil {
		for _, sg := range e.segs {
			if sg.field != "" {
				b.WriteString("{" + sg.field + "}")
			} else {
				b.WriteString(braces.Replace(sg.text))
			}
		}
		return b.String()
	}
	// Fields are marked with a control character the message does not hold, so that braces
	// of the values stay text (a message that holds all of them names its fields as text).
	bare := e.Text(func(string) string { return "" })
	mark := ""
	for c := '\x00'; c < ' '; c++ {
		if !strings.ContainsRune(bare, c) {
			mark = string(c)
			break
		}
	}
	if mark == "" {
		return braces.Replace(e.Text(nil))
	}
	parts := strings.Split(e.Text(func(field string) string { return mark + field + mark }), mark)
	for i, p := range parts {
		if i%2 == 1 {
			b.WriteString("{" + p + "}")
			continue
		}
		b.WriteString(braces.Replace(p))
	}
	return b.String()
}

// FromTemplate returns the error about field (a wire name, "" for none) whose message is
// template read as Template writes it: {name} a field, which Text names its way, and "{{",
// "}}" braces. The cause does not cross the wire.
func FromTemplate(field, template string) *Error {
	e := &Error{Field: field, segs: []segment{}}
	var text strings.Builder
	for len(template) > 0 {
		switch {
		case strings.HasPrefix(template, "{{"), strings.HasPrefix(template, "}}"):
			text.WriteByte(template[0])
			template = template[2:]
			continue
		case template[0] == '{':
			// A field's name is short: look for its brace no further (linear in the template).
			if j := strings.IndexByte(template[:min(len(template), maxFieldName+2)], '}'); j > 0 && isFieldName(template[1:j]) {
				e.segs = append(e.segs, segment{text: text.String()}, segment{field: template[1:j]})
				text.Reset()
				template = template[j+1:]
				continue
			}
		}
		text.WriteByte(template[0])
		template = template[1:]
	}
	e.segs = append(e.segs, segment{text: text.String()})
	return e
}

// maxFieldName bounds the length of a field's name in a template.
const maxFieldName = 64

// segment is a piece of a message that came as a template: text, or a field's name.
type segment struct{ text, field string }

// Unwrap returns ErrUser and, when there is one, the cause.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrUser}
	}
	return []error{ErrUser, e.Err}
}

// replaceFields replaces each {name} of format (a letter, then letters, digits, '_' or '-')
// by name(field) or the field's own name.
func replaceFields(format string, name func(string) string) string {
	if !strings.Contains(format, "{") {
		return format
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(format, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(format[i:], '}')
		if j < 0 || !isFieldName(format[i+1:i+j]) {
			b.WriteString(format[:i+1])
			format = format[i+1:]
			continue
		}
		field := format[i+1 : i+j]
		b.WriteString(format[:i])
		if name != nil {
			field = name(field)
		}
		b.WriteString(strings.ReplaceAll(field, "%", "%%"))
		format = format[i+j+1:]
	}
	b.WriteString(format)
	return b.String()
}

func isFieldName(s string) bool {
	if s == "" || len(s) > maxFieldName || !(s[0] >= 'a' && s[0] <= 'z') {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
