package matio

import (
	"fmt"
	"strconv"
	"strings"
)

// A tiny parser for the Python literals a .npy header holds: a dict of strings, booleans, ints
// and tuples (and, for structured dtypes, lists), e.g.
// {'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }

type pyKind int

const (
	pyStr pyKind = iota
	pyInt
	pyBool
	pyNone
	pyTuple
	pyList
	pyDict
)

// pyValue is a parsed literal. Ints that do not fit in int64 have big set.
type pyValue struct {
	kind  pyKind
	str   string    // pyStr; also the source text of a pyInt
	num   int64     // pyInt
	big   bool      // pyInt out of int64 range
	truth bool      // pyBool
	items []pyValue // pyTuple, pyList; dict values
	keys  []pyValue // pyDict keys
}

// maxPyDepth bounds the nesting of containers, so that hostile headers cannot exhaust the stack.
const maxPyDepth = 32

type pyParser struct {
	s   []byte
	pos int
}

// parsePyLiteral parses s as one Python literal, allowing surrounding whitespace.
func parsePyLiteral(s []byte) (pyValue, error) {
	p := &pyParser{s: s}
	v, err := p.value(0)
	if err != nil {
		return pyValue{}, err
	}
	p.space()
	if p.pos != len(p.s) {
		return pyValue{}, p.errorf("unexpected %q after the literal", p.s[p.pos])
	}
	return v, nil
}

func (p *pyParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at offset %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *pyParser) space() {
	for p.pos < len(p.s) {
		switch p.s[p.pos] {
		case ' ', '\t', '\n', '\r', '\f', '\v':
			p.pos++
		default:
			return
		}
	}
}

func (p *pyParser) value(depth int) (pyValue, error) {
	if depth > maxPyDepth {
		return pyValue{}, p.errorf("nested too deeply")
	}
	p.space()
	if p.pos >= len(p.s) {
		return pyValue{}, p.errorf("unexpected end")
	}
	c := p.s[p.pos]
	switch {
	case c == '{':
		return p.dict(depth)
	case c == '(':
		return p.sequence(depth, ')')
	case c == '[':
		return p.sequence(depth, ']')
	case c == '\'' || c == '"':
		return p.str()
	case (c == 'u' || c == 'b' || c == 'U' || c == 'B') && p.pos+1 < len(p.s) &&
		(p.s[p.pos+1] == '\'' || p.s[p.pos+1] == '"'):
		p.pos++
		return p.str()
	case c == '-' || c == '+' || (c >= '0' && c <= '9'):
		return p.integer()
	case c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z':
		start := p.pos
		for p.pos < len(p.s) && (p.s[p.pos] >= 'A' && p.s[p.pos] <= 'Z' || p.s[p.pos] >= 'a' && p.s[p.pos] <= 'z') {
			p.pos++
		}
		switch word := string(p.s[start:p.pos]); word {
		case "True":
			return pyValue{kind: pyBool, truth: true}, nil
		case "False":
			return pyValue{kind: pyBool}, nil
		case "None":
			return pyValue{kind: pyNone}, nil
		default:
			p.pos = start
			return pyValue{}, p.errorf("unknown name %q", word)
		}
	}
	return pyValue{}, p.errorf("unexpected %q", c)
}

func (p *pyParser) str() (pyValue, error) {
	quote := p.s[p.pos]
	p.pos++
	var out []byte
	for p.pos < len(p.s) {
		c := p.s[p.pos]
		p.pos++
		switch {
		case c == quote:
			return pyValue{kind: pyStr, str: string(out)}, nil
		case c == '\\' && p.pos < len(p.s):
			out = append(out, p.s[p.pos])
			p.pos++
		case c == '\n':
			return pyValue{}, p.errorf("newline in a string")
		default:
			out = append(out, c)
		}
	}
	return pyValue{}, p.errorf("unterminated string")
}

func (p *pyParser) integer() (pyValue, error) {
	start := p.pos
	if p.s[p.pos] == '-' || p.s[p.pos] == '+' {
		p.pos++
	}
	digits := p.pos
	for p.pos < len(p.s) && p.s[p.pos] >= '0' && p.s[p.pos] <= '9' {
		p.pos++
	}
	if p.pos == digits {
		return pyValue{}, p.errorf("expected digits")
	}
	text := string(p.s[start:p.pos])
	if p.pos < len(p.s) && (p.s[p.pos] == 'L' || p.s[p.pos] == 'l') { // Python 2 long
		p.pos++
	}
	n, err := strconv.ParseInt(text, 10, 64)
	if err != nil {
		return pyValue{kind: pyInt, str: text, big: true}, nil
	}
	return pyValue{kind: pyInt, str: text, num: n}, nil
}

// sequence parses a tuple or list. A parenthesised single value without a comma is that value,
// as in Python.
func (p *pyParser) sequence(depth int, end byte) (pyValue, error) {
	p.pos++
	var items []pyValue
	comma := false
	for {
		p.space()
		if p.pos < len(p.s) && p.s[p.pos] == end {
			p.pos++
			break
		}
		v, err := p.value(depth + 1)
		if err != nil {
			return pyValue{}, err
		}
		items = append(items, v)
		p.space()
		if p.pos >= len(p.s) {
			return pyValue{}, p.errorf("unexpected end, expected %q", end)
		}
		if p.s[p.pos] == ',' {
			p.pos++
			comma = true
			continue
		}
		if p.s[p.pos] != end {
			return pyValue{}, p.errorf("expected ',' or %q, got %q", end, p.s[p.pos])
		}
	}
	if end == ')' {
		if len(items) == 1 && !comma {
			return items[0], nil
		}
		return pyValue{kind: pyTuple, items: items}, nil
	}
	return pyValue{kind: pyList, items: items}, nil
}

func (p *pyParser) dict(depth int) (pyValue, error) {
	p.pos++
	d := pyValue{kind: pyDict}
	for {
		p.space()
		if p.pos < len(p.s) && p.s[p.pos] == '}' {
			p.pos++
			return d, nil
		}
		k, err := p.value(depth + 1)
		if err != nil {
			return pyValue{}, err
		}
		p.space()
		if p.pos >= len(p.s) || p.s[p.pos] != ':' {
			return pyValue{}, p.errorf("expected ':' after a dict key")
		}
		p.pos++
		v, err := p.value(depth + 1)
		if err != nil {
			return pyValue{}, err
		}
		d.keys = append(d.keys, k)
		d.items = append(d.items, v)
		p.space()
		if p.pos >= len(p.s) {
			return pyValue{}, p.errorf("unexpected end, expected '}'")
		}
		if p.s[p.pos] == ',' {
			p.pos++
			continue
		}
		if p.s[p.pos] != '}' {
			return pyValue{}, p.errorf("expected ',' or '}', got %q", p.s[p.pos])
		}
	}
}

// lookup returns the value of string key k in dict d.
func (d pyValue) lookup(k string) (pyValue, bool) {
	for i, key := range d.keys {
		if key.kind == pyStr && key.str == k {
			return d.items[i], true
		}
	}
	return pyValue{}, false
}

// maxPyText bounds the text String writes: enough for a message, which cuts it shorter
// anyway (see shortString), and a header with a huge tuple formats in constant time.
const maxPyText = 256

// String formats v roughly as Python would, for messages; past maxPyText bytes it is cut
// (the cut text ends with "...").
func (v pyValue) String() string {
	var b strings.Builder
	if !v.write(&b) {
		b.WriteString("...")
	}
	return b.String()
}

// write appends v to b, and reports false if it stopped at maxPyText bytes.
func (v pyValue) write(b *strings.Builder) bool {
	if b.Len() > maxPyText {
		return false
	}
	switch v.kind {
	case pyStr:
		b.WriteString("'")
		b.WriteString(v.str[:min(len(v.str), maxPyText)])
		if len(v.str) > maxPyText {
			return false
		}
		b.WriteString("'")
	case pyInt:
		b.WriteString(v.str[:min(len(v.str), maxPyText)])
		if len(v.str) > maxPyText {
			return false
		}
	case pyBool:
		if v.truth {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case pyNone:
		b.WriteString("None")
	case pyTuple, pyList:
		open, end := "(", ")"
		if v.kind == pyList {
			open, end = "[", "]"
		}
		b.WriteString(open)
		for i, it := range v.items {
			if i > 0 {
				b.WriteString(", ")
			}
			if !it.write(b) {
				return false
			}
		}
		if v.kind == pyTuple && len(v.items) == 1 {
			b.WriteString(",")
		}
		b.WriteString(end)
	case pyDict:
		b.WriteString("{")
		for i := range v.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			if !v.keys[i].write(b) {
				return false
			}
			b.WriteString(": ")
			if !v.items[i].write(b) {
				return false
			}
		}
		b.WriteString("}")
	default:
		b.WriteString("?")
	}
	return true
}
