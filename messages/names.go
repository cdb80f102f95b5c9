package messages

import (
	"fmt"
	"strings"
	"unicode"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// Name returns the word of an enum value, as the CLI prints it and JSON carries it: the value's
// name without its enum's prefix, in lowercase, "_" read as "-" (ALGORITHM_HPC_ANLS is
// "hpc-anls", JOB_PHASE_RUNNING is "running"). A value its enum does not define (a newer or
// hostile peer's) reads as the enum's name and the number, e.g. "Algorithm(99)".
func Name(e protoreflect.Enum) string {
	d := e.Descriptor()
	v := d.Values().ByNumber(e.Number())
	if v == nil {
		return fmt.Sprintf("%s(%d)", d.Name(), e.Number())
	}
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(string(v.Name()), valuePrefix(d))), "_", "-")
}

// ParseName returns the value of enum d whose word (see Name) is name.
func ParseName(d protoreflect.EnumDescriptor, name string) (protoreflect.EnumNumber, error) {
	values := d.Values()
	words := make([]string, values.Len())
	for i := range values.Len() {
		v := values.Get(i)
		words[i] = strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(string(v.Name()), valuePrefix(d))), "_", "-")
		if words[i] == name {
			return v.Number(), nil
		}
	}
	return 0, fmt.Errorf("unknown %s %q (known: %s)", d.Name(), name, strings.Join(words, ", "))
}

// valuePrefix returns the prefix of the names of an enum's values: the enum's name in upper
// snake case and "_" (JobPhase: "JOB_PHASE_").
func valuePrefix(d protoreflect.EnumDescriptor) string {
	var b strings.Builder
	for i, r := range string(d.Name()) {
		if i > 0 && unicode.IsUpper(r) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToUpper(r))
	}
	b.WriteByte('_')
	return b.String()
}

// enum is a generated enum type.
type enum interface {
	~int32
	protoreflect.Enum
}

// unmarshalName sets *x to the value whose word is text.
func unmarshalName[E enum](x *E, text []byte) error {
	n, err := ParseName((*x).Descriptor(), string(text))
	if err != nil {
		return err
	}
	*x = E(n)
	return nil
}

// The enums of JobSpec, JobInfo and ActorFailed read and write as their words (Name) in text
// and JSON, so that `node jobs --json` shows "running" and "did", not numbers.

// Name returns the value's word, e.g. "hpc-anls".
func (x Algorithm) Name() string { return Name(x) }

// MarshalText returns the value's word.
func (x Algorithm) MarshalText() ([]byte, error) { return []byte(Name(x)), nil }

// UnmarshalText reads a word MarshalText wrote.
func (x *Algorithm) UnmarshalText(text []byte) error { return unmarshalName(x, text) }

// Name returns the value's word, e.g. "nndsvd".
func (x Init) Name() string { return Name(x) }

// MarshalText returns the value's word.
func (x Init) MarshalText() ([]byte, error) { return []byte(Name(x)), nil }

// UnmarshalText reads a word MarshalText wrote.
func (x *Init) UnmarshalText(text []byte) error { return unmarshalName(x, text) }

// Name returns the value's word, e.g. "gram".
func (x Form) Name() string { return Name(x) }

// MarshalText returns the value's word.
func (x Form) MarshalText() ([]byte, error) { return []byte(Name(x)), nil }

// UnmarshalText reads a word MarshalText wrote.
func (x *Form) UnmarshalText(text []byte) error { return unmarshalName(x, text) }

// Name returns the value's word, e.g. "sparse".
func (x Layout) Name() string { return Name(x) }

// MarshalText returns the value's word.
func (x Layout) MarshalText() ([]byte, error) { return []byte(Name(x)), nil }

// UnmarshalText reads a word MarshalText wrote.
func (x *Layout) UnmarshalText(text []byte) error { return unmarshalName(x, text) }

// Name returns the value's word, e.g. "float32".
func (x Storage) Name() string { return Name(x) }

// MarshalText returns the value's word.
func (x Storage) MarshalText() ([]byte, error) { return []byte(Name(x)), nil }

// UnmarshalText reads a word MarshalText wrote.
func (x *Storage) UnmarshalText(text []byte) error { return unmarshalName(x, text) }

// Name returns the value's word, e.g. "sqrt".
func (x Transform) Name() string { return Name(x) }

// MarshalText returns the value's word.
func (x Transform) MarshalText() ([]byte, error) { return []byte(Name(x)), nil }

// UnmarshalText reads a word MarshalText wrote.
func (x *Transform) UnmarshalText(text []byte) error { return unmarshalName(x, text) }

// Name returns the value's word, e.g. "stream".
func (x Ingest) Name() string { return Name(x) }

// MarshalText returns the value's word.
func (x Ingest) MarshalText() ([]byte, error) { return []byte(Name(x)), nil }

// UnmarshalText reads a word MarshalText wrote.
func (x *Ingest) UnmarshalText(text []byte) error { return unmarshalName(x, text) }

// Name returns the value's word, e.g. "running".
func (x JobPhase) Name() string { return Name(x) }

// MarshalText returns the value's word.
func (x JobPhase) MarshalText() ([]byte, error) { return []byte(Name(x)), nil }

// UnmarshalText reads a word MarshalText wrote.
func (x *JobPhase) UnmarshalText(text []byte) error { return unmarshalName(x, text) }

// Name returns the value's word, e.g. "reducer".
func (x ActorRole) Name() string { return Name(x) }

// MarshalText returns the value's word.
func (x ActorRole) MarshalText() ([]byte, error) { return []byte(Name(x)), nil }

// UnmarshalText reads a word MarshalText wrote.
func (x *ActorRole) UnmarshalText(text []byte) error { return unmarshalName(x, text) }

// Name returns the value's word, e.g. "input".
func (x ErrorKind) Name() string { return Name(x) }

// MarshalText returns the value's word.
func (x ErrorKind) MarshalText() ([]byte, error) { return []byte(Name(x)), nil }

// UnmarshalText reads a word MarshalText wrote.
func (x *ErrorKind) UnmarshalText(text []byte) error { return unmarshalName(x, text) }

// Name returns the value's word, e.g. "checkpoint".
func (x JobEventKind) Name() string { return Name(x) }

// MarshalText returns the value's word.
func (x JobEventKind) MarshalText() ([]byte, error) { return []byte(Name(x)), nil }

// UnmarshalText reads a word MarshalText wrote.
func (x *JobEventKind) UnmarshalText(text []byte) error { return unmarshalName(x, text) }
