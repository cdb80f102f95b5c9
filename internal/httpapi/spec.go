package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/didnmf/didnmf/internal/jobspec"
	"github.com/didnmf/didnmf/kernels"
	"github.com/didnmf/didnmf/matio"
	"github.com/didnmf/didnmf/usererr"
)

// The keys of a JSON job spec (POST /api/v1/jobs), as the checks name the fields.
var specKeys = []string{
	"input", "algorithm", "rank", "shards", "seed", "init", "init_basis", "init_coef", "form", "storage",
	"layout", "rho", "alpha_coef", "alpha_basis", "l1_ratio", "loss", "missing", "test_fraction",
	"test_seed", "accel", "fan_in", "checkpoint_every", "max_iter", "tol", "time_limit", "stall_tol",
	"out_shared", "overwrite", "nodes", "transform",
}

// Bounds of a spec's lists and strings.
const (
	maxSpecList   = 1024
	maxSpecString = 4096
)

// fieldKeys names by their JSON keys the fields the checks name otherwise.
var fieldKeys = map[string]string{
	"fan-in":         "fan_in",
	"stop":           "max_iter",
	"natural_layout": "input",
	"detached":       "out_shared",
}

// jsonName returns the JSON key of a field a check names (the field itself when it is one).
func jsonName(field string) string {
	if k, ok := fieldKeys[field]; ok {
		return k
	}
	return field
}

// jsonField is jsonName, "" staying "".
func jsonField(field string) string {
	if field == "" {
		return ""
	}
	return jsonName(field)
}

// DecodeSpec reads a JSON job spec: an object whose keys are those of the API (see doc.go),
// every one optional but input and rank, the others at the CLI's defaults (jobspec.New). It
// is strict: an unknown key, a key given twice, a value of the wrong type and anything after
// the object are errors. It checks the spec alone (Spec.Check); every error is a
// *usererr.Error naming the key at fault.
func DecodeSpec(r io.Reader) (*jobspec.Spec, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, syntaxErr(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, usererr.Errorf("the job spec must be a JSON object, e.g. {\"input\": \"synthetic:m=200,n=100,k=5\", \"rank\": 5}")
	}
	vals := map[string]any{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxErr(err)
		}
		key, _ := tok.(string)
		if !slices.Contains(specKeys, key) {
			return nil, usererr.Field(key, "unknown key %q in the job spec (known: %s)", truncate(key), strings.Join(specKeys, ", "))
		}
		if _, dup := vals[key]; dup {
			return nil, usererr.Field(key, "{"+key+"} given twice")
		}
		var v any
		if err := dec.Decode(&v); err != nil {
			return nil, syntaxErr(err)
		}
		vals[key] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, syntaxErr(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, usererr.Errorf("the job spec must be one JSON object, with nothing after it")
	}
	return specOf(vals)
}

func syntaxErr(err error) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return err // the body's bound: 413
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return usererr.Errorf("the job spec is not complete JSON")
	}
	return usererr.Errorf("the job spec is not valid JSON: %v", err)
}

// truncate shortens a value quoted in an error.
func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// specOf builds the spec of the decoded values.
func specOf(v map[string]any) (*jobspec.Spec, error) {
	d := specDecoder{v: v}
	if _, ok := v["input"]; !ok {
		return nil, usererr.Field("input", "{input} is required: a path under the node's data roots, a list of them, or synthetic:m=,n=,k=,seed=")
	}
	if _, ok := v["rank"]; !ok {
		return nil, usererr.Field("rank", "{rank} is required")
	}
	s := jobspec.New(d.strings("input"), kernels.DID, 0, 1)
	s.Rank = d.int("rank", 0)
	s.Algo = kernels.Algorithm(d.string("algorithm", string(kernels.DID)))
	s.Shards = d.int("shards", 1)
	s.Seed = d.uint("seed", s.Seed)
	s.Init = kernels.InitMethod(d.string("init", string(kernels.InitRandom)))
	s.InitBasis = d.string("init_basis", "")
	s.InitCoef = d.string("init_coef", "")
	s.Form = enum(&d, "form", s.Form, kernels.ParseForm)
	s.Storage = enum(&d, "storage", s.Storage, kernels.ParseStorage)
	layout := enum(&d, "layout", s.Layout, matio.ParseLayout)
	s.Rho = d.float("rho", s.Rho)
	s.AlphaCoef = d.float("alpha_coef", 0)
	s.AlphaBasis = s.AlphaCoef // scikit-learn's alpha_H "same"
	if x, ok := v["alpha_basis"]; ok && x != "same" {
		s.AlphaBasis = d.float("alpha_basis", 0)
	}
	s.L1Ratio = d.float("l1_ratio", 0)
	s.Loss = d.loss()
	s.Missing = d.bool("missing")
	s.TestFraction = d.float("test_fraction", 0)
	s.TestSeed = d.uint("test_seed", 1)
	s.Accel = enum(&d, "accel", s.Accel, kernels.ParseAccel) // "off", "auto", "C,B" or "C,B,eps"
	if tr := enum(&d, "transform", matio.TransformNone, matio.ParseTransform); tr.On() {
		s.Transform = tr // "none" (the default) or "sqrt"
	}
	s.FanIn = d.int("fan_in", s.FanIn)
	if x, ok := v["checkpoint_every"]; ok && x != "auto" {
		s.CheckpointEvery = int64(d.int("checkpoint_every", 0))
		if d.err == nil && s.CheckpointEvery < 0 {
			d.fail("checkpoint_every", "{checkpoint_every} must be auto or a number of iterations >= 0, got %d", s.CheckpointEvery)
		}
	}
	s.Stop.MaxIter = d.int("max_iter", s.Stop.MaxIter)
	s.Stop.Tol = d.float("tol", s.Stop.Tol)
	s.Stop.TimeLimit = d.duration("time_limit")
	_, stallSet := v["stall_tol"]
	s.Stop.StallTol = d.float("stall_tol", s.Stop.StallTol)
	s.OutShared = d.string("out_shared", "")
	s.Overwrite = d.bool("overwrite")
	if _, ok := v["nodes"]; ok {
		s.Nodes = d.strings("nodes")
	}
	if d.err != nil {
		return nil, d.err
	}
	for i, in := range s.Inputs {
		s.Inputs[i] = matio.DefaultSeed(in, s.Seed) // seed also seeds synthetic data, as the CLI's
	}
	if s.Stop.Tol == 0 && !stallSet {
		s.Stop.StallTol = 0 // tol 0 runs exactly max_iter iterations
	}
	if s.Overwrite && s.OutShared == "" {
		return nil, usererr.Field("overwrite", "{overwrite} is for {out_shared}")
	}
	s.Detached = s.OutShared != "" // a job with out_shared runs detached, its outputs written there
	s.Layout = matio.AutoFor(s.Algo, layout)
	if err := s.Check(); err != nil {
		return nil, err
	}
	return s, nil
}

// specDecoder reads typed values out of the decoded JSON, keeping the first error.
type specDecoder struct {
	v   map[string]any
	err error
}

func (d *specDecoder) fail(key, format string, args ...any) {
	if d.err == nil {
		d.err = usererr.Field(key, format, args...)
	}
}

// shown describes a JSON value in an error.
func shown(x any) string {
	switch x := x.(type) {
	case nil:
		return "null"
	case string:
		return strconv.Quote(truncate(x)) + " (a string)"
	case json.Number:
		return truncate(x.String())
	case bool:
		return strconv.FormatBool(x)
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprint(x)
}

func (d *specDecoder) number(key string) (json.Number, bool) {
	x, ok := d.v[key]
	if !ok || d.err != nil {
		return "", false
	}
	n, isNum := x.(json.Number)
	if !isNum {
		d.fail(key, "{"+key+"} must be a number, got %s", shown(x))
		return "", false
	}
	return n, true
}

// int reads an integer in the range of int32 (def when absent).
func (d *specDecoder) int(key string, def int) int {
	n, ok := d.number(key)
	if !ok {
		return def
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil || i < math.MinInt32 || i > math.MaxInt32 {
		d.fail(key, "{"+key+"} must be an integer between %d and %d, got %s", math.MinInt32, math.MaxInt32, shown(n))
		return def
	}
	return int(i)
}

// uint reads an unsigned 64-bit integer (def when absent).
func (d *specDecoder) uint(key string, def uint64) uint64 {
	n, ok := d.number(key)
	if !ok {
		return def
	}
	u, err := strconv.ParseUint(n.String(), 10, 64)
	if err != nil {
		d.fail(key, "{"+key+"} must be an integer between 0 and %d, got %s", uint64(math.MaxUint64), shown(n))
		return def
	}
	return u
}

// float reads a finite number (def when absent).
func (d *specDecoder) float(key string, def float64) float64 {
	n, ok := d.number(key)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil || math.IsInf(f, 0) {
		d.fail(key, "{"+key+"} must be a finite number, got %s", shown(n))
		return def
	}
	return f
}

// string reads a string of at most maxSpecString bytes (def when absent).
func (d *specDecoder) string(key, def string) string {
	x, ok := d.v[key]
	if !ok || d.err != nil {
		return def
	}
	s, isStr := x.(string)
	if !isStr {
		d.fail(key, "{"+key+"} must be a string, got %s", shown(x))
		return def
	}
	if len(s) > maxSpecString {
		d.fail(key, "{"+key+"} is %d bytes long: at most %d", len(s), maxSpecString)
		return def
	}
	return s
}

// strings reads a non-empty string or list of them (at most maxSpecList, none empty).
func (d *specDecoder) strings(key string) []string {
	x, ok := d.v[key]
	if !ok || d.err != nil {
		return nil
	}
	var list []any
	switch x := x.(type) {
	case string:
		list = []any{x}
	case []any:
		list = x
	default:
		d.fail(key, "{"+key+"} must be a string or a list of strings, got %s", shown(x))
		return nil
	}
	if len(list) == 0 || len(list) > maxSpecList {
		d.fail(key, "{"+key+"} must hold 1 to %d strings, got %d", maxSpecList, len(list))
		return nil
	}
	out := make([]string, 0, len(list))
	for i, e := range list {
		s, isStr := e.(string)
		switch {
		case !isStr:
			d.fail(key, "{"+key+"}[%d] must be a string, got %s", i, shown(e))
			return nil
		case s == "":
			d.fail(key, "{"+key+"}[%d] is empty", i)
			return nil
		case len(s) > maxSpecString:
			d.fail(key, "{"+key+"}[%d] is %d bytes long: at most %d", i, len(s), maxSpecString)
			return nil
		}
		out = append(out, s)
	}
	return out
}

// bool reads a boolean (false when absent).
func (d *specDecoder) bool(key string) bool {
	x, ok := d.v[key]
	if !ok || d.err != nil {
		return false
	}
	b, isBool := x.(bool)
	if !isBool {
		d.fail(key, "{"+key+"} must be true or false, got %s", shown(x))
	}
	return b
}

// enum reads a string value through parse (def when absent). Absent is told by the key, not
// by a sentinel string: every string present, "\u0000" included, goes through parse.
func enum[T any](d *specDecoder, key string, def T, parse func(string) (T, error)) T {
	if _, ok := d.v[key]; !ok || d.err != nil {
		return def
	}
	s := d.string(key, "")
	if d.err != nil {
		return def
	}
	v, err := parse(s)
	if err != nil {
		d.fail(key, "{"+key+"}: %v", err)
		return def
	}
	return v
}

// loss reads the loss: a name (frobenius, kl, is) or a number, the beta.
func (d *specDecoder) loss() kernels.Loss {
	x, ok := d.v["loss"]
	if !ok || d.err != nil {
		return kernels.LossFrobenius
	}
	switch x := x.(type) {
	case string:
		l, err := kernels.ParseLoss(x)
		if err != nil {
			d.fail("loss", "{loss}: %v", err)
		}
		return l
	case json.Number:
		return kernels.BetaLoss(d.float("loss", 2))
	}
	d.fail("loss", "{loss} must be frobenius, kl, is or a number (the beta), got %s", shown(x))
	return kernels.LossFrobenius
}

// duration reads a duration: a Go duration string ("90s", "10m", "2h") or a number of
// seconds.
func (d *specDecoder) duration(key string) time.Duration {
	x, ok := d.v[key]
	if !ok || d.err != nil {
		return 0
	}
	switch x := x.(type) {
	case string:
		t, err := time.ParseDuration(x)
		if err != nil {
			d.fail(key, "{"+key+"} %s: not a duration: give a number with a unit, e.g. 90s, 10m or 2h", shown(x))
		}
		return t
	case json.Number:
		f := d.float(key, 0)
		if f < 0 || f > math.MaxInt64/float64(time.Second) {
			d.fail(key, "{"+key+"} must be >= 0 seconds, got %v", f)
			return 0
		}
		return time.Duration(f * float64(time.Second))
	}
	d.fail(key, "{"+key+"} must be a duration such as \"90s\" or a number of seconds, got %s", shown(x))
	return 0
}
