package figures

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseReportGood(t *testing.T) {
	data := `{"algo": "did", "input": ["a.npy", "b.npy"], "m": 784, "n": 60000, "k": 10,
		"converged": true, "shard_nodes": ["x"], "image_shape": [28, 28],
		"history": [
			{"iteration": 0, "seconds": 0.5, "objective_ratio": 1},
			{"iteration": 1, "seconds": 1.25, "objective_ratio": 0.5, "rel_err2": 0.1, "rmse": 0.02}],
		"recoveries": [{"epoch": 1, "cause": "node lost", "noticed": 3.5, "resumed": 4, "from_iteration": 20, "redone": 3},
			{}]}`
	r, err := ParseReport("report.json", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if r.M != 784 || r.N != 60000 || r.K != 10 || r.Algo != "did" || len(r.Input) != 2 || r.Input[1] != "b.npy" {
		t.Errorf("sizes or names wrong: %+v", r)
	}
	if r.ImageShape != [2]int{28, 28} {
		t.Errorf("image_shape %v", r.ImageShape)
	}
	if len(r.History) != 2 || r.History[1] != (Point{Iteration: 1, Seconds: 1.25, ObjectiveRatio: 0.5, RelErr2: 0.1, RMSE: 0.02}) {
		t.Errorf("history %+v", r.History)
	}
	if len(r.Recoveries) != 2 || r.Recoveries[0] != (Rollback{FromIteration: 20, Redone: 3, Noticed: 3.5, Resumed: 4, Cause: "node lost"}) || r.Recoveries[1] != (Rollback{}) {
		t.Errorf("recoveries %+v", r.Recoveries)
	}
}

func TestParseReportOptionalFields(t *testing.T) {
	r, err := ParseReport("r", []byte(`{"m": 5, "k": 2.0, "n": null, "image_shape": null, "history": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.M != 5 || r.K != 2 || r.N != 0 || r.ImageShape != [2]int{} || r.History != nil || r.Recoveries != nil {
		t.Errorf("%+v", r)
	}
}

func TestParseReportHostile(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		// want are substrings of the error message (besides the file name).
		want []string
	}{
		{"empty", ``, []string{"empty: want a JSON object"}},
		{"blank", " \n", []string{"empty: want a JSON object"}},
		{"not JSON", `m=5`, []string{"want a JSON object, got something that is not JSON"}},
		{"truncated", `{"m": 5, "k": 2, "history": [{"iteration": 0,`, []string{"truncated"}},
		{"not an object", `[1, 2]`, []string{"want a JSON object, got an array"}},
		{"null", `null`, []string{"want a JSON object, got null"}},
		{"trailing data", `{"m": 5, "k": 2} {"m": 1}`, []string{"data after the JSON object"}},
		{"garbage", `{"m": 5, "k": 2,,}`, []string{"malformed JSON"}},
		{"missing m", `{"k": 2}`, []string{"m: missing"}},
		{"missing k", `{"m": 2}`, []string{"k: missing"}},
		{"m a string", `{"m": "784", "k": 2}`, []string{"m: want an integer, got a string"}},
		{"m fractional", `{"m": 7.5, "k": 2}`, []string{"m: want an integer, got 7.5"}},
		{"m zero", `{"m": 0, "k": 2}`, []string{"m: want an integer >= 1, got 0"}},
		{"k negative", `{"m": 5, "k": -3}`, []string{"k: want an integer >= 1, got -3"}},
		{"m beyond int64", `{"m": 99999999999999999999999, "k": 2}`, []string{"m: integer", "out of range"}},
		{"m beyond float64", `{"m": 1e400, "k": 2}`, []string{"m: integer", "out of range"}},
		{"huge m", `{"m": 1000000000000, "k": 10}`, []string{"m, k", "more than"}},
		{"huge m and k", `{"m": 4611686018427387904, "k": 4611686018427387904}`, []string{"m, k", "more than"}},
		{"huge n", `{"m": 5, "k": 2, "n": 1e30}`, []string{"n: integer", "out of range"}},
		{"n negative", `{"m": 5, "k": 2, "n": -1}`, []string{"n: want an integer >= 0"}},
		{"algo a number", `{"m": 5, "k": 2, "algo": 3}`, []string{"algo: want a string, got a number"}},
		{"input not a list", `{"m": 5, "k": 2, "input": "x.npy"}`, []string{"input: want an array, got a string"}},
		{"input item", `{"m": 5, "k": 2, "input": ["x", 1]}`, []string{"input[1]: want a string, got a number"}},
		{"history an object", `{"m": 5, "k": 2, "history": {}}`, []string{"history: want an array, got an object"}},
		{"history item a number", `{"m": 5, "k": 2, "history": [1]}`, []string{"history[0]: want an object, got a number"}},
		{"history no iteration", `{"m": 5, "k": 2, "history": [{"seconds": 1}]}`, []string{"history[0].iteration: missing"}},
		{"history no seconds", `{"m": 5, "k": 2, "history": [{"iteration": 1}]}`, []string{"history[0].seconds: missing"}},
		{"seconds a string", `{"m": 5, "k": 2, "history": [{"iteration": 0, "seconds": 0}, {"iteration": 1, "seconds": "1"}]}`,
			[]string{"history[1].seconds: want a number, got a string"}},
		{"rel_err2 negative", `{"m": 5, "k": 2, "history": [{"iteration": 0, "seconds": 0, "rel_err2": -0.5}]}`,
			[]string{"history[0].rel_err2: want a number >= 0"}},
		{"rmse a bool", `{"m": 5, "k": 2, "history": [{"iteration": 0, "seconds": 0, "rmse": true}]}`,
			[]string{"history[0].rmse: want a number, got a boolean"}},
		{"objective_ratio too big", `{"m": 5, "k": 2, "history": [{"iteration": 0, "seconds": 0, "objective_ratio": 1e999}]}`,
			[]string{"history[0].objective_ratio: number", "out of range"}},
		{"recoveries an object", `{"m": 5, "k": 2, "recoveries": {"from_iteration": 1}}`, []string{"recoveries: want an array"}},
		{"from_iteration a string", `{"m": 5, "k": 2, "recoveries": [{"from_iteration": "3"}]}`,
			[]string{"recoveries[0].from_iteration: want an integer, got a string"}},
		{"noticed negative", `{"m": 5, "k": 2, "recoveries": [{"noticed": -1}]}`, []string{"recoveries[0].noticed: want a number >= 0"}},
		{"cause a number", `{"m": 5, "k": 2, "recoveries": [{"cause": 7}]}`, []string{"recoveries[0].cause: want a string"}},
		{"image_shape one value", `{"m": 784, "k": 2, "image_shape": [28]}`, []string{"image_shape: want [H, W], got 1 values"}},
		{"image_shape a string", `{"m": 784, "k": 2, "image_shape": "28x28"}`, []string{"image_shape: want an array, got a string"}},
		{"image_shape item", `{"m": 784, "k": 2, "image_shape": [28, "28"]}`, []string{"image_shape[1]: want an integer, got a string"}},
		{"image_shape zero", `{"m": 784, "k": 2, "image_shape": [0, 28]}`, []string{"image_shape[0]: want an integer >= 1"}},
		{"image_shape wrong size", `{"m": 784, "k": 2, "image_shape": [28, 27]}`, []string{"image_shape: image shape 28x27 has 756 pixels", "784 features"}},
		{"image_shape huge", `{"m": 784, "k": 2, "image_shape": [4294967296, 4294967296]}`, []string{"image_shape:"}},
		{"deep nesting", `{"m": 5, "k": 2, "x": ` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`, []string{"malformed JSON"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseReport("dir/report.json", []byte(tc.data))
			if err == nil {
				t.Fatalf("no error; got %+v", r)
			}
			if !errors.Is(err, ErrInput) {
				t.Errorf("%v: does not wrap ErrInput", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "dir/report.json: ") {
				t.Errorf("%q does not start with the file name", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not say %q", msg, w)
				}
			}
			if strings.Contains(msg, "\n") {
				t.Errorf("%q is more than one line", msg)
			}
		})
	}
}

func TestReadReportFiles(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadReport(filepath.Join(dir, "report.json")); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
	if _, err := ReadReport(dir); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), dir+": is a directory") {
		t.Errorf("a directory: %v", err)
	}
	big := filepath.Join(dir, "big.json")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	// A sparse file past the limit: it must be refused without being read whole.
	if err := f.Truncate(MaxReportBytes + 10); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := ReadReport(big); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("a huge file: %v", err)
	}
}

func TestParseImageShape(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want [2]int
		ok   bool
	}{
		{"28x28", [2]int{28, 28}, true},
		{"1x784", [2]int{1, 784}, true},
		{"64x32", [2]int{64, 32}, true},
		{"28x", [2]int{}, false},
		{"x28", [2]int{}, false},
		{"0x5", [2]int{}, false},
		{"5x0", [2]int{}, false},
		{"-2x5", [2]int{}, false},
		{"28*28", [2]int{}, false},
		{"28x28x3", [2]int{}, false},
		{"", [2]int{}, false},
		{"99999999999x2", [2]int{}, false},
	} {
		got, err := ParseImageShape(tc.in)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("ParseImageShape(%q) = %v, %v; want %v, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInput) {
			t.Errorf("ParseImageShape(%q): %v does not wrap ErrInput", tc.in, err)
		}
	}
}
