package httpapi

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestEncodeSpecRoundTrip: a spec shown by the API, submitted again, is the same job.
func TestEncodeSpecRoundTrip(t *testing.T) {
	for _, body := range []string{
		`{"input": "synthetic:m=20,n=100,k=3", "rank": 3}`,
		`{"input": ["synthetic:m=20,n=100,k=3,seed=4", "synthetic:m=20,n=50,k=3,seed=5"], "rank": 2, "shards": 3, "seed": 9, "algorithm": "dbcd", "max_iter": 40, "tol": 0}`,
		`{"input": "synthetic:m=20,n=100,k=3", "rank": 3, "algorithm": "mu", "loss": "kl", "alpha_coef": 0.1, "alpha_basis": 0.2, "l1_ratio": 0.5, "time_limit": "90s"}`,
		`{"input": "synthetic:m=20,n=100,k=3", "rank": 3, "missing": true, "test_fraction": 0.1, "test_seed": 7, "checkpoint_every": "auto", "stall_tol": 0.001}`,
		`{"input": "/data/counts.npz", "rank": 3, "test_fraction": 0.1, "transform": "sqrt"}`,
		`{"input": "/data/counts.npz", "rank": 3, "transform": "none"}`,
		`{"input": "/data/x.npy", "rank": 4, "checkpoint_every": 5, "out_shared": "/data/out", "overwrite": true, "fan_in": 4, "nodes": ["127.0.0.1:1", "127.0.0.1:2"]}`,
		`{"input": "/data/x.npy", "rank": 4, "init": "custom", "init_basis": "/data/b.npy", "init_coef": "/data/c.npy", "storage": "float32", "form": "gram"}`,
	} {
		want, err := DecodeSpec(strings.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		enc, err := json.Marshal(EncodeSpec(want))
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeSpec(bytes.NewReader(enc))
		if err != nil {
			t.Fatalf("%s encoded as %s: %v", body, enc, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: encoded as %s, decoded again as\n%+v\nwant\n%+v", body, enc, got, want)
		}
	}
	sq, err := DecodeSpec(strings.NewReader(`{"input": "/data/counts.npz", "rank": 3, "transform": "sqrt"}`))
	if err != nil || sq.Transform != "sqrt" || EncodeSpec(sq)["transform"] != "sqrt" {
		t.Errorf(`transform "sqrt": decoded as %q (%v), encoded as %v`, sq.Transform, err, EncodeSpec(sq)["transform"])
	}
	if _, err := DecodeSpec(strings.NewReader(`{"input": "/data/counts.npz", "rank": 3, "transform": "log"}`)); err == nil || !strings.Contains(err.Error(), "transform") {
		t.Errorf(`transform "log": %v, want an error naming transform`, err)
	}
	if EncodeSpec(nil) != nil {
		t.Error("EncodeSpec(nil) is not nil")
	}
}
