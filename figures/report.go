package figures

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"

	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/usererr"
)

// Limits on what ReadReport and ParseReport accept, so that a hostile report cannot make this
// package allocate without bound.
const (
	// MaxReportBytes is the largest report.json read: at about 110 bytes a history point,
	// room for some 600,000 iterations.
	MaxReportBytes = 64 << 20
	// MaxBasisValues is the largest basis (features x K values) read: 512 MiB of float64.
	MaxBasisValues = 1 << 26
)

// Report is what the figures need of a result directory's report.json, the file
// `node factorize --out DIR` writes. Other fields of the file are ignored.
type Report struct {
	// M, N and K are the numbers of features, samples and components (fields m, n, k).
	// M and K are at least 1 and M*K is at most MaxBasisValues; N is 0 when absent.
	M, N, K int
	// Algo is the algorithm (field algo; "" when absent).
	Algo string
	// Input names the inputs (field input; nil when absent).
	Input []string
	// History is the per-iteration history (field history), iteration 0 being the initial
	// point; nil when absent.
	History []Point
	// Recoveries are the rollbacks of a job on actors after failures (field recoveries).
	Recoveries []Rollback
	// ImageShape is {H, W} when the features are the pixels of H x W images in row-major
	// order (field image_shape); zero when absent. H*W == M when set.
	ImageShape [2]int
}

// Point is one entry of a report's history.
type Point struct {
	// Iteration is the iteration completed (0: the initial point).
	Iteration int
	// Seconds since the job started.
	Seconds float64
	// ObjectiveRatio is ||X-BC||² / ||X-B0C0||² (field objective_ratio).
	ObjectiveRatio float64
	// RelErr2 is ||X-BC||² / ||X||² (field rel_err2); 0 when absent.
	RelErr2 float64
	// RMSE is the root mean square error of the entries (field rmse); 0 when absent.
	RMSE float64
}

// Rollback is one rollback of a job to a checkpoint after a failure (an entry of the report's
// recoveries).
type Rollback struct {
	// FromIteration is the checkpoint's iteration the job resumed from (field from_iteration).
	FromIteration int
	// Redone is the number of iterations done before the failure that had to be done again
	// (field redone).
	Redone int
	// Noticed and Resumed are seconds since the job started: when the failure was noticed,
	// and when the first iteration after the rollback completed (fields noticed, resumed).
	Noticed, Resumed float64
	// Cause says what happened ("node lost", ...; field cause), "" when absent.
	Cause string
}

// ReadReport reads and checks the report.json at path (see ParseReport). Errors name path and
// wrap ErrInput (a file that cannot be opened, or is not a regular file, included), except
// for read errors. A FIFO or a device at path is refused without blocking (matio.OpenRegular).
func ReadReport(path string) (*Report, error) {
	f, err := matio.OpenRegular(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, usererr.New(path+": no such file", err)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	// The size is checked on what is read, not on Stat, which a growing file can outrun.
	data, err := io.ReadAll(io.LimitReader(f, MaxReportBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: read error: %w", path, err)
	}
	if len(data) > MaxReportBytes {
		return nil, inputErrorf("%s: larger than %d MiB: not a report", path, MaxReportBytes>>20)
	}
	return ParseReport(path, data)
}

// ParseReport parses the JSON text of a report.json; name (the file's path) starts every error
// message, which then names the field: "DIR/report.json: history[3].seconds: want a number,
// got a string". Errors wrap ErrInput. Unknown fields are ignored; a field that is null counts
// as absent. Required are m and k (integers >= 1, m*k <= MaxBasisValues); n must be an
// integer >= 0, history points need an integer iteration >= 0, and every number given must be
// finite and >= 0; image_shape, when given, must be two integers >= 1 whose product is m.
func ParseReport(name string, data []byte) (*Report, error) {
	p := parser{name: name}
	top, err := p.object("", data)
	if err != nil {
		return nil, err
	}
	r := &Report{}
	if r.M, err = p.intField(top, "", "m", true, 1); err != nil {
		return nil, err
	}
	if r.K, err = p.intField(top, "", "k", true, 1); err != nil {
		return nil, err
	}
	if r.N, err = p.intField(top, "", "n", false, 0); err != nil {
		return nil, err
	}
	if r.M > MaxBasisValues/r.K {
		return nil, p.errorf("m, k", "a basis of m x k = %d x %d values is more than the %d this reads", r.M, r.K, MaxBasisValues)
	}
	if r.Algo, err = p.stringField(top, "", "algo"); err != nil {
		return nil, err
	}
	if r.Input, err = arrayField(p, top, "input", p.str); err != nil {
		return nil, err
	}
	if r.History, err = arrayField(p, top, "history", p.point); err != nil {
		return nil, err
	}
	if r.Recoveries, err = arrayField(p, top, "recoveries", p.rollback); err != nil {
		return nil, err
	}
	if raw, ok := present(top, "image_shape"); ok {
		items, err := p.array("image_shape", raw)
		if err != nil {
			return nil, err
		}
		if len(items) != 2 {
			return nil, p.errorf("image_shape", "want [H, W], got %d values", len(items))
		}
		for i, it := range items {
			if r.ImageShape[i], err = p.integer(fmt.Sprintf("image_shape[%d]", i), it, 1); err != nil {
				return nil, err
			}
		}
		if err := CheckImageShape(r.ImageShape, r.M); err != nil {
			return nil, p.errorf("image_shape", "%v", err)
		}
	}
	return r, nil
}

// arrayField decodes the array field name of obj (nil when absent), each item with item, which
// is given the item's name ("history[3]") for its errors.
func arrayField[T any](p parser, obj map[string]json.RawMessage, name string, item func(string, json.RawMessage) (T, error)) ([]T, error) {
	raw, ok := present(obj, name)
	if !ok {
		return nil, nil
	}
	items, err := p.array(name, raw)
	if err != nil {
		return nil, err
	}
	out := make([]T, len(items))
	for i, it := range items {
		if out[i], err = item(fmt.Sprintf("%s[%d]", name, i), it); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parser decodes the fields of one report, naming the file and the field in its errors.
type parser struct{ name string }

func (p parser) errorf(field, format string, args ...any) error {
	return inputErrorf("%s: %s: %s", p.name, field, fmt.Sprintf(format, args...))
}

// object decodes raw as one JSON object (and nothing after it) into its fields.
func (p parser) object(field string, raw []byte) (map[string]json.RawMessage, error) {
	if k := kind(raw); k != "an object" {
		if field == "" {
			if k == "" {
				return nil, inputErrorf("%s: empty: want a JSON object", p.name)
			}
			return nil, inputErrorf("%s: want a JSON object, got %s", p.name, k)
		}
		return nil, p.errorf(field, "want an object, got %s", k)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var fields map[string]json.RawMessage
	if err := dec.Decode(&fields); err != nil {
		return nil, p.syntax(field, err, len(raw))
	}
	if field == "" {
		if _, err := dec.Token(); err != io.EOF {
			return nil, inputErrorf("%s: data after the JSON object, at byte %d", p.name, dec.InputOffset())
		}
	}
	return fields, nil
}

// syntax describes a JSON decoding error.
func (p parser) syntax(field string, err error, size int) error {
	var se *json.SyntaxError
	where := p.name
	if field != "" {
		where += ": " + field
	}
	switch {
	case errors.As(err, &se):
		return inputErrorf("%s: malformed JSON at byte %d: %v", where, se.Offset, se)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return inputErrorf("%s: truncated JSON (ends after %d bytes)", where, size)
	default:
		return inputErrorf("%s: malformed JSON: %v", where, err)
	}
}

func (p parser) array(field string, raw json.RawMessage) ([]json.RawMessage, error) {
	if k := kind(raw); k != "an array" {
		return nil, p.errorf(field, "want an array, got %s", k)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, p.syntax(field, err, len(raw))
	}
	return items, nil
}

func (p parser) str(field string, raw json.RawMessage) (string, error) {
	if k := kind(raw); k != "a string" {
		return "", p.errorf(field, "want a string, got %s", k)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", p.syntax(field, err, len(raw))
	}
	return s, nil
}

// number decodes a finite number >= 0.
func (p parser) number(field string, raw json.RawMessage) (float64, error) {
	if k := kind(raw); k != "a number" {
		return 0, p.errorf(field, "want a number, got %s", k)
	}
	v, err := strconv.ParseFloat(string(raw), 64)
	if err != nil || math.IsInf(v, 0) || math.IsNaN(v) {
		return 0, p.errorf(field, "number %.40s out of range", raw)
	}
	if v < 0 {
		return 0, p.errorf(field, "want a number >= 0, got %v", v)
	}
	return v, nil
}

// integer decodes an integer >= lo: a JSON number with an integer value (28, or 28.0, 2.8e1).
func (p parser) integer(field string, raw json.RawMessage, lo int) (int, error) {
	if k := kind(raw); k != "a number" {
		return 0, p.errorf(field, "want an integer, got %s", k)
	}
	v, err := strconv.Atoi(string(raw))
	if err != nil {
		f, ferr := strconv.ParseFloat(string(raw), 64)
		switch {
		case ferr != nil || math.IsInf(f, 0) || math.Abs(f) > 1<<53:
			return 0, p.errorf(field, "integer %.40s out of range", raw)
		case f != math.Trunc(f):
			return 0, p.errorf(field, "want an integer, got %v", f)
		}
		v = int(f)
	}
	if v < lo {
		return 0, p.errorf(field, "want an integer >= %d, got %d", lo, v)
	}
	return v, nil
}

// present returns the field name of obj unless it is absent or null.
func present(obj map[string]json.RawMessage, name string) (json.RawMessage, bool) {
	raw, ok := obj[name]
	if !ok || kind(raw) == "null" {
		return nil, false
	}
	return raw, true
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

func (p parser) intField(obj map[string]json.RawMessage, prefix, name string, required bool, lo int) (int, error) {
	raw, ok := present(obj, name)
	if !ok {
		if required {
			return 0, p.errorf(join(prefix, name), "missing")
		}
		return 0, nil
	}
	return p.integer(join(prefix, name), raw, lo)
}

func (p parser) numField(obj map[string]json.RawMessage, prefix, name string, required bool) (float64, error) {
	raw, ok := present(obj, name)
	if !ok {
		if required {
			return 0, p.errorf(join(prefix, name), "missing")
		}
		return 0, nil
	}
	return p.number(join(prefix, name), raw)
}

func (p parser) stringField(obj map[string]json.RawMessage, prefix, name string) (string, error) {
	raw, ok := present(obj, name)
	if !ok {
		return "", nil
	}
	return p.str(join(prefix, name), raw)
}

// point decodes a history entry: iteration and seconds are required, the errors optional.
func (p parser) point(field string, raw json.RawMessage) (Point, error) {
	obj, err := p.object(field, raw)
	if err != nil {
		return Point{}, err
	}
	var pt Point
	if pt.Iteration, err = p.intField(obj, field, "iteration", true, 0); err != nil {
		return Point{}, err
	}
	if pt.Seconds, err = p.numField(obj, field, "seconds", true); err != nil {
		return Point{}, err
	}
	if pt.ObjectiveRatio, err = p.numField(obj, field, "objective_ratio", false); err != nil {
		return Point{}, err
	}
	if pt.RelErr2, err = p.numField(obj, field, "rel_err2", false); err != nil {
		return Point{}, err
	}
	if pt.RMSE, err = p.numField(obj, field, "rmse", false); err != nil {
		return Point{}, err
	}
	return pt, nil
}

// rollback decodes a recovery: every field is optional (report.json omits zero values).
func (p parser) rollback(field string, raw json.RawMessage) (Rollback, error) {
	obj, err := p.object(field, raw)
	if err != nil {
		return Rollback{}, err
	}
	var rb Rollback
	if rb.FromIteration, err = p.intField(obj, field, "from_iteration", false, 0); err != nil {
		return Rollback{}, err
	}
	if rb.Redone, err = p.intField(obj, field, "redone", false, 0); err != nil {
		return Rollback{}, err
	}
	if rb.Noticed, err = p.numField(obj, field, "noticed", false); err != nil {
		return Rollback{}, err
	}
	if rb.Resumed, err = p.numField(obj, field, "resumed", false); err != nil {
		return Rollback{}, err
	}
	if rb.Cause, err = p.stringField(obj, field, "cause"); err != nil {
		return Rollback{}, err
	}
	return rb, nil
}

// kind names the JSON type of raw by its first byte ("" when raw is empty).
func kind(raw []byte) string {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 {
		return ""
	}
	switch c := raw[0]; {
	case c == '{':
		return "an object"
	case c == '[':
		return "an array"
	case c == '"':
		return "a string"
	case c == 't' || c == 'f':
		return "a boolean"
	case c == 'n':
		return "null"
	case c == '-' || (c >= '0' && c <= '9'):
		return "a number"
	default:
		return "something that is not JSON"
	}
}
